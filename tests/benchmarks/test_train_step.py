"""Tests of benchmarks/train_step.py's handling of bad input (one error line, status 2)."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# One subprocess per case (each imports the trainer: seconds): a bad flag, a bad config
# value whose message comes from model/captioner.py (tested there in full), and a
# misspelled config field (train.py's flag parser).
@pytest.mark.parametrize("args, message", [
    (["--steps", "0"], "error: --steps=0 must be at least 1"),
    (["--config.model.t5.variant=mt5-huge"], "error: config.model.t5: unknown T5 variant "
                                              "'mt5-huge'"),
    (["--config.batch_sise=2"], "error: --config.batch_sise=2: the config has no field"),
])
def test_bad_input_exits_2_with_one_error_line(args, message):
    result = subprocess.run(
        [sys.executable, "benchmarks/train_step.py", "--config", "configs/demo.py", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1].startswith(message)
