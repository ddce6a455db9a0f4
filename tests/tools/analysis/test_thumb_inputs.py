"""Bad input to python -m tools.analysis.thumb: one `error:` line before the work, and a
report that cannot be written after it loses nothing (issue 21 items 4, 8 and 9)."""

import re

import pytest

from tests import cli
from tests.evaluation import full_disk
from tests.formats.small_files import write_lines as _write
from tests.tools.formats.thumb_files import row as _row
from tools.analysis import thumb

RATINGS = [("Human", "1", 5, 5, 0, 0, 0), ("A", "1", 4, 3, 0, 0, 0),
           ("Human", "2", 5, 4, 0, -0.5, 0), ("A", "2", 5, 4, 0, 0, 0)]


def _error_lines(capsys, argv):
    return cli.error_lines(capsys, thumb.main, argv)


@pytest.mark.parametrize("args, message", [
    (["--seed", "-1"], r"argument --seed: expected an integer >= 0, got -1"),
    (["--samples", "100000000000"], r"argument --samples: expected an integer in 1\.\.100000, "),
    (["--samples", "0"], r"argument --samples: expected an integer in 1\.\."),
    (["--bogus"], r"unrecognized arguments: --bogus"),
])
def test_a_bad_flag_is_one_error_line_before_the_ratings_are_read(tmp_path, capsys, args, message):
    lines = _error_lines(capsys, [str(tmp_path / "missing.jsonl"), *args])
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(message, lines[0]), \
        lines


def test_a_report_on_a_full_disk_keeps_the_results_leaving_no_file(tmp_path, capsys):
    path = _write(tmp_path / "thumb.jsonl", [_row(*r) for r in RATINGS])
    with full_disk.full_disk(tmp_path / "disk") as disk:
        out = disk / "report"
        assert thumb.main([path, "--out", str(out), "--samples", "20"]) == 2
        assert full_disk.listing(out) == {}  # No empty thumb.csv, nor any other file.
    captured = capsys.readouterr()
    assert captured.out.splitlines()[1].split()[:2] == ["Human", "2"]  # The table came first.
    assert captured.err.strip().splitlines() == [
        f"error: --out {out}: cannot write the report (No space left on device); the results "
        f"are printed above"]
