"""The training process loads no plotting library, web framework or optimal-transport solver.

train.py on the tests' tiny config (configs/demo.py with a smaller model and data: the same
code path, evaluators included) runs in a process of its own through its evaluations; at its
exit the process has imported none of matplotlib (the reports' charts), flask (the rating
app) and ot (POT, VIFIDEL's solver). The run's shapes are those of the suite's shared
four-step run, so its programs come from the compilation cache.
"""

import json
import os
import subprocess
import sys

import pytest

from tests import tiny

pytestmark = pytest.mark.slow

LIBRARIES = ("matplotlib", "flask", "ot")

# Runs train.py as `python train.py --config C --workdir W` does, then prints what was imported.
_SCRIPT = f"""
import atexit, runpy, sys

atexit.register(lambda: print("imported:", sorted(
    name for name in {LIBRARIES!r} if name in sys.modules)))
sys.argv = ["train.py", "--config", sys.argv[1], "--workdir", sys.argv[2]]
runpy.run_path("train.py", run_name="__main__")
"""


def test_training_through_its_evaluations_imports_no_chart_web_or_transport_library(
        tiny_demo, tmp_path):
    config = tiny.write_config_file(tmp_path / "tiny_config.py", tiny_demo)
    workdir = tmp_path / "run"
    result = subprocess.run([sys.executable, "-c", _SCRIPT, config, str(workdir)],
                            cwd=tiny.REPO, capture_output=True, text=True, timeout=600,
                            env=tiny.cli_env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "imported: []"
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
        evaluated = [r["step"] for r in map(json.loads, f) if "eval/cider_d/avg" in r]
    assert evaluated[0] == 0  # It ran its first evaluation (and the later ones).
