"""The evaluation command lines' bad input and failures: one `error:` line, exit status 2
(issue 21 item 8: a stray argument, a number out of range, checked while the arguments are
parsed; issue 31: a binary input file, a repeated row, a closed pipe, a full disk, which
leaves the previous output file or none, never an empty or partial one)."""

import os
import re
import subprocess
import sys

import pytest

import errors
import paper_tables
from tests import cli
from tests.evaluation import full_disk
from tools import cider as cider_cli
from tools.analysis import compare, correlate, meta
from tools.formats import side_by_side
from tools.vifidel import __main__ as vifidel_cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("main, argv, message", [
    (cider_cli.main, ["--references", "r", "--predictions", "p", "stray"],
     r"unrecognized arguments: stray \(see python -m tools.cider --help\)"),
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


def _cider_files(tmp_path):
    from tests.formats.small_files import write_lines
    from tests.tools.test_cider import PREDS, write_references

    return (write_references(tmp_path / "captions.jsonl"),
            write_lines(tmp_path / "preds.jsonl", PREDS))


@pytest.mark.parametrize("flag", ["--per-image", "--save-df"])
@pytest.mark.parametrize("previous", [None, "the previous file\n"])
def test_cider_on_a_full_disk_leaves_the_previous_file_or_none(tmp_path, capsys, flag, previous):
    refs, preds = _cider_files(tmp_path)
    with full_disk.full_disk(tmp_path / "disk", keep=previous and {"out": previous}) as disk:
        status = cider_cli.main(["--references", refs, "--predictions", preds,
                                 flag, str(disk / "out")])
        left = full_disk.listing(disk)
        kept = (disk / "out").read_text() if left else None
    captured = capsys.readouterr()
    assert status == 2 and "average" in captured.out  # The scores, printed first.
    assert captured.err.strip().splitlines() == [
        f"error: cannot write {disk}/out (No space left on device); the scores are printed "
        f"above"]
    assert (left, kept) == (({"out": len(previous)}, previous) if previous else ({}, None))


def test_cider_names_a_binary_df_file(tmp_path, capsys):
    refs, preds = _cider_files(tmp_path)
    (tmp_path / "df.bin").write_bytes(b"\x00\x01\n\xff\xfe binary")
    status = cider_cli.main(["--references", refs, "--predictions", preds, "--df",
                             str(tmp_path / "df.bin")])
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {tmp_path}/df.bin:2: not UTF-8 (invalid start byte); not a document "
        f"frequency file"]


def test_cider_names_a_repeated_key(tmp_path, capsys):
    refs, preds = _cider_files(tmp_path)
    with open(preds, "w") as f:
        f.write('{"image/key": "img0", "lang": "en", "caption": "a dog", "caption": "a red bus"}\n')
    assert cider_cli.main(["--references", refs, "--predictions", preds]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {preds}:1: key 'caption' appears twice in one object (a reader would keep "
        f"only the last value)"]


BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\xff"


@pytest.mark.parametrize("main", [correlate.main, meta.main], ids=["correlate", "meta"])
def test_a_binary_side_by_side_file_is_one_error_line(tmp_path, capsys, main):
    path = tmp_path / "d.csv"
    path.write_bytes(BINARY)
    lines = cli.error_lines(capsys, lambda argv: errors.run_main(main, argv),
                            ["--side-by-side", str(path)])
    assert lines == [f"error: {path}:1: not UTF-8 text (invalid start byte); is it a CSV file?"]


def test_a_repeated_side_by_side_row_is_an_error_not_more_points(tmp_path, capsys):
    rows = (paper_tables.FOLDER / side_by_side.FILE_NAME).read_text().splitlines()
    path = tmp_path / "d.csv"
    path.write_text("\n".join(rows + [rows[5]]) + "\n")
    lines = cli.error_lines(capsys, lambda argv: errors.run_main(correlate.main, argv),
                            ["--side-by-side", str(path)])
    m2, m1, lang = rows[5].split(",")[:3]
    assert lines == [f"error: {path}:{len(rows) + 1}: {m2} vs {m1} in {lang!r} again (first at "
                     f"line 6); each pair of models is evaluated once per language"]


def test_compare_into_a_closed_pipe_ends_quietly(tmp_path):
    from tests.tools.analysis.test_compare import _two_results

    dir_a, dir_b = _two_results(tmp_path, 0.05)
    read, write = os.pipe()
    os.close(read)  # As `| head` does once it has its lines.
    try:
        result = subprocess.run([sys.executable, "-m", "tools.analysis.compare", dir_a, dir_b,
                                 "--json", "--samples", "20"], cwd=REPO, stdout=write,
                                stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (0, "")


def _deep_inputs(tmp_path):
    """{tool: argv} each naming one file nested 100,000 deep (the others well-formed)."""
    from tools.humaneval import __main__ as humaneval_cli

    refs, preds = _cider_files(tmp_path)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    results = tmp_path / "results"
    results.mkdir()
    (results / "per_image.jsonl").write_text('{"a": ' + deep.read_text() + "}\n")
    release = tmp_path / "release"
    release.mkdir()
    (release / "captions.jsonl").write_text(deep.read_text())
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("2 2\ndog 1 0\ncat 0 1\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"image/key": "img0", "labels": ["dog"]}\n')
    return {
        "cider": (cider_cli.main, ["--references", refs, "--predictions", str(deep)]),
        "vifidel": (vifidel_cli.main, ["--references", refs, "--predictions", str(deep),
                                       "--labels", str(labels), "--vectors", str(vectors)]),
        "compare": (compare.main, [str(results), str(results)]),
        "humaneval create": (humaneval_cli.main, [
            "create", "--type", "quality", "--release", str(release), "--langs", "en",
            "--references", "--out", str(tmp_path / "session")]),
    }


@pytest.mark.parametrize("tool", ["cider", "vifidel", "compare", "humaneval create"])
def test_a_file_nested_100000_deep_is_one_line(tmp_path, capsys, tool):
    main, argv = _deep_inputs(tmp_path)[tool]
    line = cli.error_line(capsys, main, argv)
    assert "not readable JSON (nested too deep" in line


# Issue 54 point 5: hints that run as printed; a missing references file is one line.

@pytest.mark.parametrize("tool", ["cider", "vifidel", "report", "compare"])
def test_a_missing_references_file_is_one_line(tmp_path, capsys, tool):
    from tools import table8
    _, preds = _cider_files(tmp_path)
    missing = str(tmp_path / "nothere.jsonl")
    main, argv = {
        "cider": (cider_cli.main, ["--references", missing, "--predictions", preds]),
        "vifidel": (vifidel_cli.main, ["--references", missing, "--predictions", preds,
                                       "--labels", preds, "--vectors", preds]),
        "report": (table8.main, [str(tmp_path / "R"), "--predictions", preds,
                                 "--references", missing]),
        "compare": (compare.main, [preds, preds, "--references", missing]),
    }[tool]
    assert cli.error_line(capsys, main, argv) == \
        f"error: XM3600 captions file not found: {missing}\n"


def _partial_predictions(tmp_path):
    """(references, a predictions file with 'en' of img0 and img1 only)."""
    from tests.formats.small_files import write_lines
    from tests.tools.test_cider import PREDS, write_references
    return (write_references(tmp_path / "captions.jsonl"),
            write_lines(tmp_path / "partial.jsonl", [p for p in PREDS[:2]]))


def test_compare_suggests_no_flag_it_lacks(tmp_path, capsys):
    refs, partial = _partial_predictions(tmp_path)
    line = cli.error_line(capsys, compare.main, [partial, partial, "--references", refs])
    assert "--allow-missing" not in line
    assert line.endswith("compare pairs the models image by image: it needs a prediction of "
                         "every image\n")


def test_compare_on_a_predictions_file_suggests_no_placeholder_command(tmp_path, capsys):
    _, partial = _partial_predictions(tmp_path)
    line = cli.error_line(capsys, compare.main, [partial, partial])
    assert line == (f"error: {partial} is a predictions file, not a results folder: give "
                    f"--references with XM3600's captions.jsonl to score it here\n")


def test_the_command_report_suggests_runs_as_printed(tmp_path, capsys, monkeypatch):
    import shlex

    from tools import table8
    refs, partial = _partial_predictions(tmp_path)
    monkeypatch.chdir(tmp_path)
    line = cli.error_line(capsys, table8.main, ["R", "--predictions", "partial.jsonl",
                                                "--references", "captions.jsonl"])
    command = re.search(r"\((python -m tools.cider .*) scores only the images", line)[1]
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "tools.cider"]
    assert cider_cli.main(words[3:]) == 0
    assert re.search(r"^en\s+2\s", capsys.readouterr().out, re.M)
