# `make demo`: synthetic data -> train the demo captioner -> in-loop XM3600 CIDEr.
# `make test`: the test suite. Each sets up .venv by itself (Python 3.11).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
DEMO_DATA := demo_data
DEMO_WORKDIR := runs/demo

.PHONY: demo test lint clean-demo

# A stamp per requirements file: the install reruns only when the file changed.
$(VENV)/.stamp-runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.stamp-test: requirements-test.txt $(VENV)/.stamp-runtime
	$(PY) -m pip install -q -r requirements-test.txt
	touch $@

$(DEMO_DATA)/.complete: $(VENV)/.stamp-runtime
	$(PY) -m data.demo --out $(DEMO_DATA)
	touch $@

# Progress and evaluation lines are printed; library INFO logs are kept out of the console.
demo: $(VENV)/.stamp-runtime $(DEMO_DATA)/.complete
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) train.py --config configs/demo.py --workdir $(DEMO_WORKDIR) \
		--verbosity=-1

test: $(VENV)/.stamp-test
	$(PY) -m pytest

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check .

clean-demo:
	rm -rf $(DEMO_DATA) $(DEMO_WORKDIR)
