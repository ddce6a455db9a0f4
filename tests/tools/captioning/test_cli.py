"""The command line (python -m tools.captioning) on the tiny trained run: every bad input is one
`error:` line, exit status 2, and leaves what was already written alone."""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

import errors
from formats import predictions
from tests import tiny
from tests.formats.small_files import read_jsonl
from tests.tools.captioning.conftest import own_process_signals
from tests.tools.captioning.test_export import _rewrite
from tools import cider
from tools.captioning import Decoding
from tools.captioning import __main__ as cli

REPO = tiny.REPO


def _main(*args):
    """Runs the command line as `python -m tools.captioning` does; returns its exit status."""
    with pytest.raises(SystemExit) as exit_info:
        errors.run_main(cli.main, [str(a) for a in args])
    return exit_info.value.code


def _fails(capsys, *args):
    """Runs the command line expecting bad input; returns its one error line."""
    assert _main(*args) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert captured.out == ""
    return captured.err


@pytest.fixture(scope="module")
def photos(demo_images, tmp_path_factory):
    """A folder with three of the demo images."""
    folder = tmp_path_factory.mktemp("photos")
    for image in demo_images[:3]:
        shutil.copy(image, folder)
    return folder


def test_table_of_a_folder(caption_run, captioner, photos, capsys):
    assert _main(photos, "--workdir", caption_run, "--langs", "en,es,hi,zh",
                 "--batch_size", "4") == 0
    captured = capsys.readouterr()
    files = sorted(str(photos / name) for name in os.listdir(photos))
    want = captioner.caption(files, "en,es,hi,zh", batch_size=4)
    lines = captured.out.splitlines()
    assert lines[0] == files[0] and len(lines) == 3 * 5
    for i, caption in enumerate(want):
        image, row = divmod(i, 4)
        line = lines[image * 5 + 1 + row]
        assert line == f"  {caption.lang}  {caption.log_prob:7.2f}  {caption.text}"
    assert captured.err.startswith("captioned 3 image(s) in 4 language(s) with greedy, step 4")


def _all_photos_by_beam(captioner, photos):
    """The API's captions of the photos in every language by beam search (3 beams)."""
    files = sorted(str(photos / name) for name in os.listdir(photos))
    return captioner.caption(files, "all", Decoding("beam", beam_size=3), batch_size=4)


def test_a_jsonl_out_file_holds_the_apis_captions(caption_run, captioner, photos, tmp_path,
                                                  capsys):
    out = tmp_path / "captions.jsonl"
    pattern = str(photos / "*.jpg")
    assert _main(pattern, "--workdir", caption_run, "--langs", "all", "--decode", "beam",
                 "--beam_size", "3", "--format", "jsonl", "--out", out, "--batch_size",
                 "4") == 0
    captured = capsys.readouterr()
    assert captured.out == "" and f"captions in {out}" in captured.err
    assert read_jsonl(out) == [c.record() for c in _all_photos_by_beam(captioner, photos)]


def test_the_exported_model_writes_the_captions_of_the_run(captioner, exported, photos,
                                                           tmp_path):
    pattern = str(photos / "*.jpg")
    # The exported model: its own beam settings by default, the same captions.
    again = tmp_path / "exported.jsonl"
    assert _main(pattern, "--exported", exported, "--langs", "all", "--decode", "beam",
                 "--format", "jsonl", "--out", again, "--batch_size", "4") == 0
    assert read_jsonl(again) == [c.record() for c in _all_photos_by_beam(captioner, photos)]


def test_sampling_settings_reach_the_decoder(caption_run, captioner, demo_images, capsys):
    # 8 images in 2 batches: each batch its own key, folded from the seed.
    args = ("--workdir", caption_run, "--decode", "sample", "--temperature", "0.8",
            "--top_k", "20", "--seed", "9", "--format", "jsonl", "--batch_size", "4")
    assert _main(*demo_images[:8], *args) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    want = captioner.caption(demo_images[:8], "en", Decoding("sample", temperature=0.8,
                                                             top_k=20, seed=9), batch_size=4)
    assert got == [c.record() for c in want]


def test_unreadable_images_stop_or_are_skipped(caption_run, demo_images, tmp_path, capsys):
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n broken")
    images = [demo_images[0], demo_images[1], corrupt, demo_images[2]]
    out = tmp_path / "out.jsonl"
    # Stop: the error names the image; the captions before it stay in the out file.
    error = _fails(capsys, *images, "--workdir", caption_run, "--format", "jsonl",
                   "--out", out, "--batch_size", "1")
    assert error == (f"error: cannot decode image {corrupt}: not an image in a format PIL "
                     f"reads; the captions of the 2 image(s) before it are in {out}\n")
    assert [r["image"] for r in read_jsonl(out)] == demo_images[:2]
    # Skip: named on stderr, the others captioned.
    assert _main(*images, "--workdir", caption_run, "--on_error", "skip", "--format", "jsonl",
                 "--out", out) == 0
    err = capsys.readouterr().err
    assert f"skipped: cannot decode image {corrupt}: not an image" in err
    assert ", skipped 1 " in err
    assert [r["image"] for r in read_jsonl(out)] == [demo_images[i] for i in (0, 1, 2)]
    # A missing file stops before anything is decoded or written.
    before = out.read_text()
    missing = tmp_path / "missing.jpg"
    assert _fails(capsys, demo_images[0], missing, "--workdir", caption_run, "--out", out) \
        == f"error: image file not found: {missing}\n"
    assert out.read_text() == before


def test_bad_input_is_one_error_line(caption_run, exported, demo_images, tmp_path, capsys):
    out = tmp_path / "kept.jsonl"
    out.write_text("{\"earlier\": \"results\"}\n")
    untrained = tmp_path / "untrained"
    untrained.mkdir()
    shutil.copy(os.path.join(caption_run, "config.json"), untrained)
    newer = _rewrite(exported, tmp_path / "v2.npz", lambda m: m.update(version=2))
    image = demo_images[0]
    cases = [  # (arguments, a regular expression the error line matches)
        ((image, "--workdir", caption_run, "--langs", "en,xx"),
         "unknown language 'xx'; known: en, es, hi, zh"),
        ((image, "--workdir", untrained), "no checkpoint in .*untrained/checkpoints"),
        ((image, "--workdir", caption_run, "--step", "3"), "no checkpoint of step 3"),
        ((image, "--exported", newer), "v2.npz is format version 2; this code reads version 1"),
        ((image, "--exported", exported, "--step", "2"), "--step is a setting of --workdir"),
        ((image, "--exported", exported, "--decode", "beam", "--beam_size", "8"),
         r"was exported with beam search \(3 beams"),
        ((tmp_path / "nothing*.jpg", "--workdir", caption_run), "no file matches the pattern"),
        ((image, "--workdir", caption_run, "--batch_size", "0"), "--batch_size must be >= 1"),
        ((image, "--workdir", caption_run, "--decode", "nucleus"), "invalid choice: 'nucleus'"),
        ((image, "--workdir", caption_run, "--exported", exported), "not allowed with argument"),
    ]
    for args, message in cases:
        assert re.search(message, _fails(capsys, *args, "--out", out))
        assert out.read_text() == "{\"earlier\": \"results\"}\n"  # never opened
    nowhere = tmp_path / "no" / "such.jsonl"
    assert _fails(capsys, image, "--workdir", caption_run, "--out", nowhere) == \
        f"error: --out {nowhere}: No such file or directory\n"


def test_a_beam_too_large_is_one_error_line_keeping_the_out_file(caption_run, demo_images,
                                                                 tmp_path, capsys):
    out = tmp_path / "kept.jsonl"
    out.write_text("{\"earlier\": \"results\"}\n")
    line = _fails(capsys, demo_images[0], "--workdir", caption_run, "--decode", "beam",
                  "--beam_size", "100000000", "--out", out)
    assert re.fullmatch(r"error: --beam_size: 100000000 beams x batch 1 x 16 tokens: decoding "
                        r"needs about [\d.]+ GiB, more than the [\d.]+ GiB of memory here; give "
                        r"fewer\n", line), line
    assert out.read_text() == "{\"earlier\": \"results\"}\n"


def test_check_langs_counts_a_repeated_language_once(captioner):
    assert captioner.check_langs("en,zh,en") == ("en", "zh")


def test_a_run_writes_each_language_once_ignoring_a_late_ctrl_c(caption_run, demo_images,
                                                                capsys):
    with own_process_signals() as left, pytest.raises(SystemExit) as exit_info:
        errors.run_main(cli.main, [demo_images[0], "--workdir", caption_run, "--langs",
                                   "en,zh,en", "--format", "jsonl"], True)
    assert exit_info.value.code == 0
    assert [json.loads(line)["lang"] for line in capsys.readouterr().out.splitlines()] == \
        ["en", "zh"]
    # Once the captions are written, a late Ctrl-C or SIGTERM is ignored: the run exits 0.
    assert left == [signal.SIG_IGN, signal.SIG_IGN]


def test_progress_bar_on_a_terminal(caption_run, demo_images, capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert _main(*demo_images[:3], "--workdir", caption_run, "--batch_size", "1") == 0
    assert "3/3" in terminal.getvalue() and "image" in terminal.getvalue()
    assert capsys.readouterr().out.count(".jpg\n") == 3  # the table, apart from the bar


def test_readme_command_as_its_own_process(caption_run, demo_images):
    # The README's command after `make demo`, on the tiny run.
    result = subprocess.run(
        [sys.executable, "-m", "tools.captioning", demo_images[0], "--workdir", caption_run,
         "--langs", "en,es,hi,zh"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == demo_images[0]
    assert [line.split()[0] for line in lines[1:]] == ["en", "es", "hi", "zh"]
    assert "captioned 1 image(s) in 4 language(s)" in result.stderr


def test_jsonl_captions_are_scored_by_evaluation_cider_as_written(caption_run, tiny_demo,
                                                                  tmp_path, capsys):
    # The XM3600 images captioned as the run's evaluator decodes them (greedy, its
    # max_decode_len of 8 tokens), then scored: the in-loop scores of that step, exactly.
    out = tmp_path / "p.jsonl"
    xm3600 = tiny_demo / "xm3600"
    assert _main(xm3600 / "images", "--workdir", caption_run, "--step", "2", "--langs",
                 "en,zh", "--max_len", "8", "--format", "jsonl", "--out", out) == 0
    capsys.readouterr()
    assert cider.main(["--predictions", str(out), "--references",
                       str(xm3600 / "captions.jsonl"), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)["scores"]
    logged = {}
    for record in read_jsonl(os.path.join(caption_run, "metrics.jsonl")):
        if record["step"] == 2:
            logged.update(record)
    assert scores == {"en": logged["eval/cider_d/en"], "zh": logged["eval/cider_d/zh"]}
    assert scores["zh"] > 0  # a comparison of real scores, not of zeros
    assert set(predictions.read(str(out))) == {"en", "zh"}


def test_a_fifo_given_as_an_image_says_what_it_is(caption_run, demo_images, tmp_path, capsys):
    fifo = tmp_path / "picture.jpg"
    os.mkfifo(fifo)
    assert _fails(capsys, demo_images[0], fifo, "--workdir", caption_run) \
        == f"error: image {fifo} is a FIFO (named pipe), not a file\n"
