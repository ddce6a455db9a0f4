"""The evaluation command lines' usage errors: one `error:` line, exit status 2 (issue 21 item
8): a stray argument, a number out of range, checked while the arguments are parsed."""

import re

import pytest

from evaluation.cider import __main__ as cider_cli
from tests import cli
from tools.analysis import compare, correlate
from tools.vifidel import __main__ as vifidel_cli


@pytest.mark.parametrize("main, argv, message", [
    (cider_cli.main, ["--references", "r", "--predictions", "p", "stray"],
     r"unrecognized arguments: stray \(see python -m evaluation.cider --help\)"),
    (cider_cli.main, ["--predictions", "p"], r"the following arguments are required: "
                                             r"--references"),
    (vifidel_cli.main, ["--references", "r", "--predictions", "p", "--labels", "l",
                        "--vectors", "v", "stray"], r"unrecognized arguments: stray"),
    (compare.main, ["a", "b", "--seed", "-1"], r"argument --seed: expected an integer >= 0"),
    (compare.main, ["a", "b", "--samples", "nan"], r"argument --samples: expected an integer"),
    (correlate.main, ["--side-by-side", "f", "stray"], r"unrecognized arguments: stray"),
])
def test_a_usage_error_is_one_line(capsys, main, argv, message):
    lines = cli.error_lines(capsys, main, argv)
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(message, lines[0]), \
        lines


def test_cider_refuses_a_repeated_key_in_one_line(tmp_path, capsys):
    from tests.evaluation.cider.test_cli import write_references

    refs = write_references(tmp_path / "captions.jsonl")
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"image/key": "img0", "lang": "en", "caption": "a dog", '
                     '"caption": "a red bus"}\n')
    assert cider_cli.main(["--references", refs, "--predictions", str(preds)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {preds}:1: key 'caption' appears twice in one object (a reader would keep "
        f"only the last value)"]


@pytest.mark.parametrize("flag, make_path, message", [
    ("--per-image", lambda tmp: "/proc/x/out.jsonl", r"--per-image /proc/x/out.jsonl: no folder"),
    ("--per-image", lambda tmp: str(tmp), r"--per-image .* is a folder"),
    ("--save-df", lambda tmp: str(tmp / "none" / "df.json"), r"--save-df .*df.json: no folder"),
])
def test_cider_checks_its_output_files_before_reading_the_inputs(tmp_path, capsys, flag,
                                                                 make_path, message):
    # The inputs do not exist: the output was checked first.
    status = cider_cli.main(["--references", str(tmp_path / "r"), "--predictions",
                             str(tmp_path / "p"), flag, make_path(tmp_path)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and re.search(message, lines[0]), lines


def test_cider_prints_the_scores_before_an_output_file_fails(tmp_path, capsys, monkeypatch):
    import errno

    from tests.evaluation.cider.test_cli import PREDS, write_lines, write_references

    refs = write_references(tmp_path / "captions.jsonl")
    preds = write_lines(tmp_path / "preds.jsonl", PREDS)
    out = str(tmp_path / "per_image.jsonl")

    def full_disk(path, *args, **kwargs):  # The fault: the disk fills while it is written.
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(cider_cli.per_image, "write", full_disk)
    status = cider_cli.main(["--references", refs, "--predictions", preds, "--per-image", out])
    captured = capsys.readouterr()
    assert status == 2 and "average" in captured.out
    assert captured.err.strip().splitlines() == [
        f"error: cannot write {out} (No space left on device); the scores are printed above"]
