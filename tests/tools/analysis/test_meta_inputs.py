"""Bad input to python -m tools.analysis.meta: one `error:` line before the work, and a
report that cannot be written after it loses nothing (issue 21 items 4, 8, 9 and 10)."""

import re

import pytest

from tests import cli
from tests.evaluation import full_disk
from tests.tools.analysis.test_meta import files  # noqa: F401 (a fixture)
from tools.analysis import meta


def _error_lines(capsys, argv):
    return cli.error_lines(capsys, meta.main, argv)


@pytest.mark.parametrize("args, message", [
    (["--seed", "-1"], r"argument --seed: expected an integer >= 0, got -1"),
    (["--samples", "100000000000"], r"argument --samples: expected an integer in 0\.\.100000"),
    (["--confidence", "nan"], r"argument --confidence: expected a number in \(0, 1\), got nan"),
    (["--confidence", "1"], r"argument --confidence: expected a number in \(0, 1\), got 1"),
    (["stray"], r"unrecognized arguments: stray"),
])
def test_a_bad_flag_is_one_error_line_before_the_inputs_are_read(tmp_path, capsys, args,
                                                                 message):
    lines = _error_lines(capsys, [*args, "--thumb", str(tmp_path / "missing.jsonl")])
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(message, lines[0]), \
        lines


def test_an_unknown_lang_is_one_line_naming_the_flag_and_the_languages(tmp_path, capsys):
    status = meta.main(["--thumb", str(tmp_path / "missing.jsonl"), "--lang", "xx"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1, lines
    assert re.match(r"error: --lang: unknown language 'xx'; known: ar, bn, .* en, .* zh$",
                    lines[0])


def test_a_report_on_a_full_disk_keeps_the_results_and_leaves_no_file(files, tmp_path,  # noqa: F811
                                                                     capsys):
    with full_disk.full_disk(tmp_path / "disk") as disk:
        out = disk / "report"
        status = meta.main(["--thumb", files["thumb"], "--references", files["refs"],
                            "--metric", "cider-d", "--samples", "10", "--out", str(out)])
        assert full_disk.listing(out) == {}  # No empty meta.md, nor any other file.
    captured = capsys.readouterr()
    assert status == 2
    assert "cider-d" in captured.out  # The correlations were printed first.
    assert captured.err.strip().splitlines() == [
        f"error: --out {out}: cannot write the report (No space left on device); the results "
        f"are printed above"]
