"""docs/captioning.md's Python example run as written from a folder outside the repository
(paths replaced in `PLACES`): its lines must be the API's captions."""

import json
import os
import subprocess
import sys

import pytest
from PIL import Image

import errors
from tests.tools.captioning.test_minimal_venv import DOC, REPO
from tools.captioning import Decoding
from training import run as run_lib


def documented_example():
    """The code block of docs/captioning.md's "Python" section."""
    with open(DOC, encoding="utf-8") as f:
        section = f.read().split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    block, started = [], False
    for line in section.splitlines():
        if line.startswith("    "):
            block.append(line[4:])
            started = True
        elif started and line.strip():
            break
        elif started:
            block.append("")
    return "\n".join(block).strip() + "\n"


def test_the_documented_example_runs_from_a_users_folder(caption_run, captioner, demo_images,
                                                         tmp_path, monkeypatch):
    places = {"/path/to/xm3600/runs/demo": caption_run}  # The paths the docs name.
    code = documented_example()
    assert "from tools.captioning import Captioner, Decoding" in code
    for written, here in places.items():
        assert written in code
        code = code.replace(written, here)
    folder = tmp_path / "my_project"
    folder.mkdir()
    (folder / "my_captions.py").write_text(code, encoding="utf-8")
    Image.open(demo_images[0]).save(folder / "photo.jpg", quality=95)
    Image.open(demo_images[1]).save(folder / "scan.png")
    env = {**os.environ, "PYTHONPATH": REPO}
    result = subprocess.run([sys.executable, "my_captions.py"], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    monkeypatch.chdir(folder)  # The API's reading of the same relative paths, for comparison.
    want = captioner.caption(["photo.jpg", "scan.png"], "en,es,hi,zh",
                             Decoding("beam", beam_size=4, alpha=0.6))
    assert result.stdout.splitlines() == [
        f"{c.image} {c.lang} {c.log_prob} {c.text} {c.tokens}" for c in want]
    # Without the repository on the path, the one thing to do is what the docs say.
    env.pop("PYTHONPATH")
    result = subprocess.run([sys.executable, "my_captions.py"], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=300)
    assert "ModuleNotFoundError: No module named 'tools'" in result.stderr


def test_a_relative_vocabulary_is_found_from_any_folder(caption_run, tmp_path, monkeypatch):
    # A run trained in the repository (as `make demo`'s) names its vocabulary relative to it.
    with open(os.path.join(caption_run, "config.json"), encoding="utf-8") as f:
        absolute = json.load(f)["vocab"]["path"]
    relative = os.path.join(".cache", "test_vocab", "demo.model")
    os.makedirs(os.path.join(REPO, ".cache", "test_vocab"), exist_ok=True)
    with open(absolute, "rb") as f, open(os.path.join(REPO, relative), "wb") as g:
        g.write(f.read())
    monkeypatch.chdir(tmp_path)
    vocab = run_lib.vocabulary(relative, saved=True)
    assert vocab.path == os.path.join(REPO, relative)
    assert vocab.model_proto == run_lib.vocabulary(absolute, saved=True).model_proto
    missing = os.path.join("nowhere", "demo.model")
    with pytest.raises(errors.InputError) as info:
        run_lib.vocabulary(missing, saved=True)
    assert str(info.value) == (f"vocabulary {missing} (the run's config.json vocab.path) not "
                               f"found; a relative path is read from the current folder, else "
                               f"from the repository's ({REPO})")
