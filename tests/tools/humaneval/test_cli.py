"""The command line (python -m tools.humaneval): the study end to end, and bad input as one line."""

import json
import os
import sqlite3
import subprocess
import sys

from tests import tiny
from tests.cli import error_line
from tools.humaneval import __main__ as cli
from tools.humaneval import session as session_lib

REPO = tiny.REPO


def _create_args(release, results_pair, out, *extra):
    return ["create", "--type", "sxs", "--release", release, "--langs", "en,zh",
            "--m1", results_pair[0], "--m2", results_pair[1], "--subset-size", "6",
            "--out", out, *extra]


def _error(capsys, argv):
    return error_line(capsys, cli.main, argv)


def test_the_study_end_to_end(release, results_pair, tmp_path, capsys):
    out = str(tmp_path / "session")
    cli.main(_create_args(release, results_pair, out, "--m1-name", "BB", "--m2-name", "Bg"))
    assert "wrote" in capsys.readouterr().out
    cli.main(["simulate", "--session", out, "--bias", "en-1=0.5"])
    assert "SIMULATED" in capsys.readouterr().out
    cli.main(["status", "--session", out])
    assert capsys.readouterr().out.count("\n") == 6  # one line per rater
    cli.main(["export", "--session", out, "--out", str(tmp_path / "export")])
    cli.main(["analyze", "--session", out, "--out", str(tmp_path / "report")])
    with open(tmp_path / "export" / "side_by_side.csv", encoding="utf-8") as f:
        assert f.readline().strip() == ("m2,m1,lang,set,delta_sxs,delta_cider_xm600,"
                                        "delta_cider_xm3600,delta_cider_coco_dev")
        assert f.readline().startswith("Bg,BB,en,core,")
    assert os.path.exists(tmp_path / "report" / "report.md")


def test_bad_create_flags(release, results_pair, tmp_path, capsys):
    out = str(tmp_path / "s")
    assert "no predictions in 'es'" in _error(capsys, _create_args(
        release, results_pair, out, "--langs", "en,es"))
    assert "unknown language 'xx'" in _error(capsys, _create_args(
        release, results_pair, out, "--langs", "xx"))
    assert "--m2" in _error(capsys, ["create", "--type", "sxs", "--release", release,
                                     "--langs", "en", "--m1", results_pair[0], "--out", out])
    assert "the following arguments are required: --out" in _error(
        capsys, ["create", "--type", "sxs", "--release", release, "--langs", "en"])
    assert "captions file not found" in _error(capsys, _create_args(
        str(tmp_path), results_pair, out))
    assert not os.path.exists(os.path.join(out, "session.json"))


def test_commands_on_a_hand_edited_or_missing_session_or_rating(release, results_pair, tmp_path,
                                                                capsys):
    out = str(tmp_path / "session")
    cli.main(_create_args(release, results_pair, out))
    cli.main(["simulate", "--session", out])
    capsys.readouterr()
    path = os.path.join(out, "session.json")
    original = open(path, encoding="utf-8").read()
    data = json.loads(original)
    data["items"][0]["texts"].reverse()  # which model wrote which side, changed by hand
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    for command in (["serve", "--session", out], ["status", "--session", out],
                    ["export", "--session", out, "--out", str(tmp_path / "x")],
                    ["analyze", "--session", out, "--out", str(tmp_path / "y")]):
        assert "does not match its digest" in _error(capsys, command)
    # A key written twice (a reader would keep the last one): refused, naming key and file.
    with open(path, "w", encoding="utf-8") as f:
        f.write(original.replace('"name":', '"name": "other", "name":', 1))
    err = _error(capsys, ["status", "--session", out])
    assert "key 'name' appears twice" in err and path in err
    with open(path, "w", encoding="utf-8") as f:
        f.write(original)
    ratings = sqlite3.connect(os.path.join(out, "ratings.sqlite"))
    count = ratings.execute("SELECT COUNT(*) FROM ratings").fetchone()[0]
    ratings.close()
    assert count == sum(map(len, session_lib.load(out).assignments.values()))  # none lost
    assert "not found" in _error(capsys, ["serve", "--session", str(tmp_path / "none")])
    assert "exists" in _error(capsys, _create_args(release, results_pair, out))
    assert open(path, encoding="utf-8").read() == original
    assert "no rater 'zz'" in _error(capsys, ["simulate", "--session", out, "--bias", "zz=1"])
    conn = sqlite3.connect(os.path.join(out, "ratings.sqlite"))  # a rating changed by hand
    conn.execute("""UPDATE ratings SET answer = '{"choice": 9}' WHERE id = 3""")
    conn.commit()
    conn.close()
    err = _error(capsys, ["analyze", "--session", out, "--out", str(tmp_path / "r")])
    assert "ratings row id 3" in err and "outside -3..3" in err


def test_out_of_range_values_are_one_error_line_changing_nothing(release, results_pair, tmp_path,
                                                               capsys):
    out = str(tmp_path / "session")
    cli.main(_create_args(release, results_pair, out))
    (tmp_path / "a_file").write_text("mine")
    capsys.readouterr()
    before = {name: os.path.getsize(os.path.join(out, name)) for name in os.listdir(out)}
    cases = [
        (["serve", "--session", out, "--port", "70000"], "expected an integer in 0..65535"),
        (["serve", "--session", out, "--threads", "0"], "expected an integer >= 1"),
        (["simulate", "--session", out, "--noise", "nan"], "expected a number in [0, 100"),
        (["simulate", "--session", out, "--noise", "inf"], "expected a number in [0, 100"),
        (["simulate", "--session", out, "--noise", "-1"], "expected a number in [0, 100"),
        (["simulate", "--session", out, "--bias", "en-1=nan"], "--bias 'en-1=nan': expected"),
        (["simulate", "--session", out, "--seed", "-1"], "expected an integer in 0.."),
        (["analyze", "--session", out, "--out", str(tmp_path / "report"), "--resamples", "0"],
         "expected an integer >= 1"),
        (["analyze", "--session", out, "--out", str(tmp_path / "report"), "--resamples", "-5"],
         "expected an integer >= 1"),
        (["export", "--session", out, "--out", str(tmp_path / "a_file")], "is a file"),
        (_create_args(release, results_pair, str(tmp_path / "new"), "--seed", "-1"),
         "--seed must be >= 0"),
        (["texts", "--out", str(tmp_path)], f"--out {tmp_path}: a folder"),
    ]
    for argv, message in cases:
        assert message in _error(capsys, argv), argv
    assert not os.path.exists(tmp_path / "report") and not os.path.exists(tmp_path / "new")
    assert (tmp_path / "a_file").read_text() == "mine"
    assert {name: os.path.getsize(os.path.join(out, name)) for name in os.listdir(out)} == before


def test_analyze_into_an_existing_file_is_one_error_line_keeping_the_file(release, results_pair,
                                                                      tmp_path, capsys):
    out = str(tmp_path / "session")
    cli.main(_create_args(release, results_pair, out))
    (tmp_path / "notes.txt").write_text("mine")
    capsys.readouterr()
    err = _error(capsys, ["analyze", "--session", out, "--out", str(tmp_path / "notes.txt")])
    assert f"--out {tmp_path / 'notes.txt'} is a file" in err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_the_real_command_prints_one_error_line_without_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tools.humaneval", "serve", "--session", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_a_crowd_study_from_the_command_line(release, results_pair, tmp_path, capsys, consent):
    translation = tmp_path / "zh.json"
    translation.write_text(json.dumps({"submit": "提交"}, ensure_ascii=False), encoding="utf-8")
    out = str(tmp_path / "crowd")
    cli.main(_create_args(release, results_pair, out, "--quota", "8", "--gold-share", "0.34",
                          "--crowd", "--consent",
                          consent, "--translation", f"zh={translation}",
                          "--completion-code", "ABC"))
    captured = capsys.readouterr()
    assert "wrote" in captured.out
    # What deserves a look comes as warning lines; the session is made.
    assert all(line.startswith("warning: ") for line in captured.err.splitlines())
    assert "not translated, shown in English" in captured.err
    session = session_lib.load(out)
    assert session.crowd["completion_code"] == "ABC" and session.crowd["quota"] == 8
    assert session.data["study"]["translations"]["zh"] == {"submit": "提交"}
    assert "--translation 'zh': expected LANG=FILE" in _error(
        capsys, _create_args(release, results_pair, str(tmp_path / "x"), "--translation", "zh"))


def test_create_on_a_full_disk_is_one_error_line_leaving_nothing(release, results_pair, tmp_path):
    from tests import tiny
    with tiny.small_tmpfs(tmp_path / "disk", "32k") as disk:
        (disk / "filler").write_bytes(b"x" * 28 * 1024)
        out = disk / "session"
        result = subprocess.run(
            [sys.executable, "-m", "tools.humaneval", *_create_args(release, results_pair,
                                                                    str(out))],
            cwd=REPO, capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr
        errors_ = [line for line in result.stderr.splitlines() if not line.startswith("warning: ")]
        assert len(errors_) == 1 and errors_[0].startswith("error: ")
        assert "could not be written" in errors_[0] and "Traceback" not in result.stderr
        assert sorted(os.listdir(disk)) == ["filler"]  # no session.json, no temporary file


def test_status_into_a_closed_pipe_ends_quietly(release, results_pair, tmp_path):
    out = str(tmp_path / "session")
    cli.main(_create_args(release, results_pair, out, "--raters", "40", "--gold-share", "0"))
    command = (f"{sys.executable} -m tools.humaneval status --session {out} | head -1")
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.count("\n") == 1 and result.stderr == "", result.stderr
    assert result.returncode == 0
