# `make demo`: synthetic data -> train the demo captioner -> in-loop XM3600 CIDEr.
# `make test`: the test suite. Each sets up .venv by itself (Python 3.11); `make test` also
# installs Debian's chromium + chromedriver when missing (the rating-page browser test).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
DEMO_DATA := demo_data
DEMO_WORKDIR := runs/demo

.PHONY: demo test test-fast lint clean-demo

# A stamp per requirements file: the install reruns only when the file changed.
$(VENV)/.stamp-runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.stamp-test: requirements-test.txt $(VENV)/.stamp-runtime
	$(PY) -m pip install -q -r requirements-test.txt
	touch $@

# The human-evaluation browser test drives Debian's chromium through chromedriver; it fails
# (never skips) without them, so the test target installs them when either is missing.
# Missing binaries make the stamp phony, so a machine that lost them installs them again.
BROWSER_OK := $(shell command -v chromium >/dev/null 2>&1 && \
	command -v chromedriver >/dev/null 2>&1 && echo yes)
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
ifneq ($(BROWSER_OK),yes)
.PHONY: $(VENV)/.stamp-browser
endif
$(VENV)/.stamp-browser: $(VENV)/.stamp-runtime
	command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || { \
		$(SUDO) apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium \
			chromium-driver; }
	touch $@

$(DEMO_DATA)/.complete: $(VENV)/.stamp-runtime
	$(PY) -m tools.demo --out $(DEMO_DATA)
	touch $@

# The console shows progress and evaluation lines (train.py keeps library logs out of it).
demo: $(VENV)/.stamp-runtime $(DEMO_DATA)/.complete
	$(PY) train.py --config configs/demo.py --workdir $(DEMO_WORKDIR)

# Two pytest workers (pytest-xdist): most tests compile on one core, so two halve the suite's
# time on a 2-core machine. `make test TEST_WORKERS=0` runs them in one process.
TEST_WORKERS ?= 2
test: $(VENV)/.stamp-test $(VENV)/.stamp-browser
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal

# The edit loop: everything but the tests marked slow (tests/conftest.py), in under 3 minutes.
test-fast: $(VENV)/.stamp-test $(VENV)/.stamp-browser
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not slow"

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check .

clean-demo:
	rm -rf $(DEMO_DATA) $(DEMO_WORKDIR)
