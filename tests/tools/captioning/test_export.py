"""The exported captioner (tools/captioning/export.py): its captions equal the run's, through the
API and through run_exported.py copied alone into an empty folder and run as its own process."""

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import zipfile

import numpy as np
import pytest
from PIL import Image

from tests.cli import error_line
from tests.tools.captioning.conftest import EXPORTED, own_process_signals
from tools.captioning import Captioner, Decoding, InputError, export, restore
from tools.captioning import __main__ as cli
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


def test_the_manifest_describes_the_contents(exported, caption_run):
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
    np.testing.assert_allclose([c.log_prob for c in got], [c.log_prob for c in want], rtol=1e-6)


def test_stand_alone_runner(captioner, exported, demo_images, odd_images, tmp_path):
    # Only what it says it imports.
    tree = ast.parse(open(runner_module.__file__, encoding="utf-8").read())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert imported - {"argparse", "json", "os", "signal", "sys", "warnings", "zipfile",
                       "zlib"} == {
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
    by_name = from_export.caption(demo_images[:1], "en", "beam")  # the program's settings
    assert [c.tokens for c in by_name] == [c.tokens for c in from_export.caption(
        demo_images[:1], "en", Decoding("beam", beam_size=3, alpha=0.6))]
    with pytest.raises(InputError, match=r"was exported with beam search \(3 beams, alpha "
                                         r"0.6\), not beam search \(5 beams"):
        from_export.caption(demo_images[:1], "en", Decoding("beam", beam_size=5))


def test_a_garbage_program_is_one_error_line_naming_it(exported, tmp_path, demo_images,
                                                      capsys):
    with np.load(exported) as archive:
        arrays = {name: archive[name] for name in archive.files}
    arrays["program_greedy"] = np.frombuffer(np.random.default_rng(0).bytes(4096), np.uint8)
    garbage = tmp_path / "garbage.npz"
    with open(garbage, "wb") as f:
        np.savez(f, **arrays)
    line = error_line(capsys, cli.main, [demo_images[0], "--exported", str(garbage)])
    assert re.search(r"garbage.npz is damaged: its program_greedy is not a jax.export program",
                     line), line


def test_export_command_line(export_cli, caption_run, tmp_path, capsys):
    path, printed, signals_left = export_cli
    # Once the file is written, a late Ctrl-C or SIGTERM is ignored: the export exits 0.
    assert signals_left == [signal.SIG_IGN, signal.SIG_IGN]
    size = os.path.getsize(path) / 2**20
    assert printed == (f"wrote {path} ({size:.2f} MiB): step 4 of {caption_run}, 4 languages, "
                       f"programs greedy, beam search (3 beams, alpha 0.6), sampling "
                       f"(temperature 0.8, top-20)\n")
    for args, message in (
            (["--out", str(tmp_path / "nowhere" / "x.npz")], "its folder does not exist"),
            (["--out", str(tmp_path / "x.npz"), "--step", "9"], "no checkpoint of step 9"),
            (["--out", str(tmp_path / "x.npz"), "--top_k", "5000"],
             "top_k: top-k 5000 exceeds the model's 768 logits")):
        assert message in error_line(capsys, export.main, ["--workdir", caption_run, *args])
    assert not (tmp_path / "x.npz").exists()


def _damaged_exports(exported, folder):
    """{what: path} of files that are not a readable export of the session's run."""
    with open(exported, "rb") as f:
        data = f.read()
    truncated = folder / "truncated.npz"
    truncated.write_bytes(data[:len(data) // 2])
    random = folder / "random.npz"
    random.write_bytes(np.random.default_rng(0).bytes(4096))
    reshaped = folder / "reshaped.npz"
    with np.load(exported) as archive:
        arrays = {name: archive[name] for name in archive.files}
    arrays["param_00003"] = arrays["param_00003"].reshape(-1)
    with open(reshaped, "wb") as f:
        np.savez(f, **arrays)
    found = {"truncated": str(truncated), "random": str(random), "reshaped": str(reshaped)}
    crafted = {"no_programs": lambda m: m.pop("programs"),
               "prompts_int": lambda m: m.update(prompts=5),
               "no_value_range": lambda m: m["image"].pop("value_range")}
    for what, change in crafted.items():
        found[what] = _rewrite(exported, folder / f"{what}.npz", change)
    found["npy"] = str(folder / "array.npy")
    np.save(found["npy"], arrays["param_00000"])
    return found


DAMAGED = {"truncated": r"truncated.npz is not an exported captioner \(",
           "random": r"random.npz is not an exported captioner \(",
           "reshaped": r"reshaped.npz is damaged: param_00003 is float32\[\d+\], its \w+ "
                       r"program takes float32\[\d+, \d+\]",
           "no_programs": r"no_programs.npz is damaged: its manifest has no programs$",
           "prompts_int": r"prompts_int.npz is damaged: its manifest's prompts is 5, not an "
                          r"object of languages' token id lists$",
           "no_value_range": r"no_value_range.npz is damaged: its manifest has no "
                             r"image.value_range$",
           "npy": r"array.npy is not an exported captioner \(a single array, not an .npz "
                  r"archive\)$"}


def _run_exported(monkeypatch, capsys, *args):
    """(exit status, stdout, stderr) of run_exported.py's main, in this process."""
    monkeypatch.setattr(sys, "argv", ["run_exported.py", *map(str, args)])
    try:
        runner_module.main()
        status = 0
    except SystemExit as e:
        status = e.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _end_readers_later(fifo, seconds=5):
    """Opens `fifo` for writing and closes it in `seconds`, so that a reader waiting for a
    writer reads an empty file instead of hanging the test."""
    def end():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # No reader: nothing waits.
            pass

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()


def test_the_stand_alone_runner_writes_each_language_once_ignoring_a_late_ctrl_c(
        exported, demo_images, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["run_exported.py", exported, demo_images[0], "--langs",
                                      "en,zh,en"])
    with own_process_signals() as left:
        runner_module.main(own_process=True)
    assert [json.loads(line)["lang"] for line in capsys.readouterr().out.splitlines()] == \
        ["en", "zh"]  # A language given twice counts once.
    assert left == [signal.SIG_IGN, signal.SIG_IGN]  # Once printed, a late Ctrl-C exits 0.


def test_damaged_exports_are_refused_by_the_api_or_one_error_line(exported, tmp_path,
                                                                  demo_images, capsys):
    for what, path in _damaged_exports(exported, tmp_path).items():
        # the API, and python -m tools.captioning --exported
        with pytest.raises(InputError, match=DAMAGED[what]):
            Captioner.from_exported(path)
        assert re.search(DAMAGED[what], error_line(capsys, cli.main,
                                                   [demo_images[0], "--exported", path]))


def test_the_runners_bad_input_is_one_error_line(exported, tmp_path, demo_images, monkeypatch,
                                                 capsys):
    not_an_image = tmp_path / "notes.jpg"
    not_an_image.write_text("not an image")
    fifo = tmp_path / "fifo.jpg"  # Opened, it would wait for a writer forever.
    os.mkfifo(fifo)
    _end_readers_later(fifo)
    damaged = _damaged_exports(exported, tmp_path)
    cases = [(path, demo_images[0], "--langs", "en", DAMAGED[what])
             for what, path in damaged.items()]
    cases += [
        (exported, not_an_image, f"cannot decode image {not_an_image}: cannot identify"),
        (exported, tmp_path / "missing.jpg", "image file not found: .*missing.jpg"),
        (exported, fifo, f"image file {fifo} is not a regular file"),
        (fifo, demo_images[0], f"exported model {fifo} is not a regular file"),
        (exported, demo_images[0], "--langs", "en,xx",
         "--langs: unknown language 'xx'; known: en, es, hi, zh"),
        (exported, demo_images[0], "--decode", "nucleus",
         "--decode nucleus: .* has programs greedy, beam, sample"),
        (tmp_path / "missing.npz", demo_images[0], "exported model .*missing.npz not found"),
        # Usage errors too (argparse's own are usage + error lines).
        (exported, demo_images[0], "--seed", "-1", r"--seed must be in \[0, 2\*\*32 - 1\]"),
        (exported, demo_images[0], "--seed", "abc", "argument --seed: invalid int value"),
        (exported, "the following arguments are required: images"),
    ]
    for *args, message in cases:
        status, out, err = _run_exported(monkeypatch, capsys, *args)
        assert (status, out) == (2, "") and err.startswith("error: ") and err.count("\n") == 1
        assert re.search(message, err), err
