"""Tests of the exported captioner (tools/captioning/export.py) and its stand-alone runner.

The export's captions must equal the run's token for token, through the API and through
tools/captioning/run_exported.py copied alone into an empty folder (so that it can import nothing
of the repository) and run as its own process.
"""

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from PIL import Image

import errors
from tests.tools.captioning.conftest import EXPORTED
from tools.captioning import Captioner, Decoding, InputError, export, restore
from tools.captioning import run_exported as runner_module


@pytest.fixture(scope="module")
def from_export(exported):
    return Captioner.from_exported(exported)


@pytest.fixture(scope="module")
def odd_images(demo_images, tmp_path_factory):
    """Demo images stored the hard ways: EXIF-rotated, transparent PNG, 16-bit gray."""
    folder = tmp_path_factory.mktemp("odd_images")
    picture = Image.open(demo_images[0]).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 8  # "rotate 90 counter-clockwise to view"
    rotated = str(folder / "rotated.jpg")
    picture.transpose(Image.Transpose.ROTATE_270).save(rotated, exif=exif.tobytes())
    rgba = np.asarray(Image.open(demo_images[1]).convert("RGBA")).copy()
    rgba[:, :8, 3] = 0
    transparent = str(folder / "transparent.png")
    Image.fromarray(rgba, "RGBA").save(transparent)
    gray = np.asarray(Image.open(demo_images[2]).convert("L")).astype(np.uint16) * 257
    wide = str(folder / "gray16.png")
    Image.fromarray(gray).save(wide)
    return [rotated, transparent, wide]


def test_manifest_and_contents(exported, caption_run):
    run = restore.restore(caption_run)
    with np.load(exported) as archive:
        info = json.loads(archive["manifest"].tobytes())
        num_params = sum(1 for name in archive.files if name.startswith("param_"))
    assert (info["format"], info["version"]) == ("xm3600-captioner", export.FORMAT_VERSION)
    assert info["source"]["step"] == 4
    assert info["image"]["size"] == 32 and info["max_len"] == 16 and info["eos_id"] == 1
    assert info["programs"] == {"greedy": {}, "beam": {"beam_size": 3, "alpha": 0.6},
                                "sample": {"temperature": 0.8, "top_k": 20}}
    assert {lang: list(p) for lang, p in run.prompts.items()} == info["prompts"]
    assert num_params == info["num_params"] == len(__import__("jax").tree.leaves(run.params))


@pytest.mark.parametrize("decoding", EXPORTED + (Decoding("sample", temperature=0.8,
                                                          top_k=20, seed=7),),
                         ids=lambda d: f"{d.method}-{d.seed}")
def test_exported_captions_equal_the_runs(captioner, from_export, demo_images, decoding):
    images = demo_images[:2]
    want = captioner.caption(images, "en,zh", decoding)
    got = from_export.caption(images, "en,zh", decoding)
    assert [c.tokens for c in got] == [c.tokens for c in want]
    assert [c.text for c in got] == [c.text for c in want]
    np.testing.assert_allclose([c.log_prob for c in got], [c.log_prob for c in want],
                               rtol=1e-6)


def test_stand_alone_runner(captioner, exported, demo_images, odd_images, tmp_path):
    # Only what it says it imports.
    tree = ast.parse(open(runner_module.__file__, encoding="utf-8").read())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert imported - {"argparse", "json", "os", "sys", "warnings", "zipfile", "zlib"} == {
        "jax", "numpy", "sentencepiece", "PIL"}
    # Run from a folder holding the script alone, with no path into the repository.
    shutil.copy(runner_module.__file__, tmp_path / "run_exported.py")
    images = demo_images[:1] + odd_images  # read as the API reads them, or captions differ
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "run_exported.py", exported, *images, "--langs", "hi",
         "--decode", "sample", "--seed", "5"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    got = [json.loads(line) for line in result.stdout.splitlines()]
    # The runner decodes every row in one batch: so does the API here.
    want = captioner.caption(images, "hi", Decoding("sample", temperature=0.8, top_k=20,
                                                     seed=5), batch_size=4)
    assert got == [c.record() for c in want]


def _rewrite(path, out, change):
    """Copies an export with its manifest changed by `change(manifest)`."""
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    info = json.loads(arrays["manifest"].tobytes())
    change(info)
    arrays["manifest"] = np.frombuffer(json.dumps(info).encode(), np.uint8)
    with open(out, "wb") as f:
        np.savez(f, **arrays)
    return str(out)


def test_files_that_are_not_this_export(exported, tmp_path, from_export, demo_images):
    newer = _rewrite(exported, tmp_path / "v2.npz", lambda m: m.update(version=2))
    with pytest.raises(InputError, match=r"v2.npz is format version 2; this code reads "
                                         r"version 1: export the run again"):
        Captioner.from_exported(newer)
    other = _rewrite(exported, tmp_path / "other.npz", lambda m: m.update(format="x"))
    with pytest.raises(InputError, match="other.npz is not an exported captioner .format 'x'"):
        Captioner.from_exported(other)
    text = tmp_path / "notes.npz"
    text.write_text("not a zip")
    with pytest.raises(InputError, match="notes.npz is not an exported captioner"):
        Captioner.from_exported(str(text))
    with zipfile.ZipFile(tmp_path / "empty.npz", "w"):
        pass
    with pytest.raises(InputError, match="empty.npz is not an exported captioner"):
        Captioner.from_exported(str(tmp_path / "empty.npz"))
    with pytest.raises(InputError, match="exported model .*missing.npz not found"):
        Captioner.from_exported(str(tmp_path / "missing.npz"))
    # Its programs' settings are fixed.
    assert from_export.default_decoding("beam") == Decoding("beam", beam_size=3, alpha=0.6)
    with pytest.raises(InputError, match=r"was exported with beam search \(3 beams, alpha "
                                         r"0.6\), not beam search \(5 beams"):
        from_export.caption(demo_images[:1], "en", Decoding("beam", beam_size=5))


def test_export_command_line(export_cli, caption_run, tmp_path, capsys):
    path, printed = export_cli
    size = os.path.getsize(path) / 2**20
    assert printed == (f"wrote {path} ({size:.2f} MiB): step 4 of {caption_run}, 4 languages, "
                       f"programs greedy, beam search (3 beams, alpha 0.6), sampling "
                       f"(temperature 0.8, top-20)\n")
    for args, message in (
            (["--out", str(tmp_path / "nowhere" / "x.npz")], "its folder does not exist"),
            (["--out", str(tmp_path / "x.npz"), "--step", "9"], "no checkpoint of step 9"),
            (["--out", str(tmp_path / "x.npz"), "--top_k", "5000"],
             "top_k: top-k 5000 exceeds the model's 768 logits")):
        with pytest.raises(SystemExit) as exit_info:
            errors.run_main(export.main, ["--workdir", caption_run, *args])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "x.npz").exists()
