"""The exported model runs where only the packages docs/captioning.md lists are installed.

A new virtual environment (kept in .cache/minimal_venv/<hash of the pip line>) runs
tools/captioning/run_exported.py copied alone; its captions must be the API's. Slow."""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from formats import predictions
from tools.captioning import Decoding
from tools.captioning import run_exported as runner_module

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DOC = os.path.join(REPO, "docs", "captioning.md")


def documented_install():
    """The packages of the `pip install` line in docs/captioning.md's exported-model section."""
    with open(DOC, encoding="utf-8") as f:
        section = f.read().split("\n## The exported model", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip() for line in section.splitlines()
             if line.strip().startswith("pip install ")]
    assert len(lines) == 1, lines
    return lines[0].split()[2:]


@contextlib.contextmanager
def _locked(path):
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # One creator among the test workers.
        yield


def minimal_venv(packages):
    """The venv's python with exactly `packages` installed (created once per package list)."""
    key = hashlib.sha1(" ".join(packages).encode()).hexdigest()[:12]
    root = os.path.join(REPO, ".cache", "minimal_venv")
    folder = os.path.join(root, key)
    python = os.path.join(folder, "bin", "python")
    os.makedirs(root, exist_ok=True)
    with _locked(os.path.join(root, f"{key}.lock")):
        if not os.path.exists(python):
            building = f"{folder}.building"
            shutil.rmtree(building, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", building], check=True)
            # --no-compile: only the modules the runner imports get compiled, when it does.
            subprocess.run([os.path.join(building, "bin", "pip"), "install", "-q",
                            "--disable-pip-version-check", "--no-compile", *packages],
                           check=True, capture_output=True, text=True)
            os.replace(building, folder)  # Complete, or not there.
    return python


def test_the_documented_packages_are_enough(exported, captioner, demo_images, tmp_path):
    packages = documented_install()
    assert {p.split("==")[0] for p in packages} == {
        "jax", "jaxlib", "numpy", "pillow", "sentencepiece", "flatbuffers"}
    python = minimal_venv(packages)
    # Nothing of this repository, nor of its own venv, is importable there.
    shutil.copy(runner_module.__file__, tmp_path / "run_exported.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    probe = subprocess.run([python, "-c", "import errors"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert "No module named 'errors'" in probe.stderr
    result = subprocess.run(
        [python, "run_exported.py", exported, *demo_images[:3], "--langs", "en,zh",
         "--decode", "beam"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    got = [json.loads(line) for line in result.stdout.splitlines()]
    want = captioner.caption(demo_images[:3], "en,zh", Decoding("beam", beam_size=3),
                             batch_size=6)  # The runner decodes every row in one batch.
    assert got == [c.record() for c in want]
    # Its output is a predictions file, as the API's.
    (tmp_path / "p.jsonl").write_text(result.stdout, encoding="utf-8")
    assert set(predictions.read(str(tmp_path / "p.jsonl"))) == {"en", "zh"}
