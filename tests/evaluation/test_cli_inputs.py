"""The evaluation command lines' usage errors: one `error:` line, exit status 2 (issue 21 item
8): a stray argument, a number out of range, checked while the arguments are parsed."""

import re

import pytest

from evaluation.analysis import compare, correlate
from evaluation.cider import __main__ as cider_cli
from evaluation.vifidel import __main__ as vifidel_cli


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
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
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
