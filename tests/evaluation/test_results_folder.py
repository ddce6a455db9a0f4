"""The checkpoint tool's results folder (evaluation/results_folder.py) is the tool's own
(issue 55 point 6): evaluated again, files it did not write are kept, those it replaces named,
and predictions it would not recompute refused before the evaluation."""

import os

import pytest

from evaluation import evaluate
from tests import cli, tiny


@pytest.fixture(scope="module")
def run(two_step_run, tmp_path_factory):
    """(config file, run folder) of the test run's shared `two_step_run`, copied."""
    root = tmp_path_factory.mktemp("results_folder")
    config_path = tiny.write_config_file(root / "tiny_config.py", two_step_run.data_dir,
                                         **two_step_run.overrides)
    return config_path, two_step_run.copy_to(root / "run")


def _args(run, out, langs):
    return ["evaluation.evaluate", "--config", run[0], "--workdir", run[1], "--evals", "xm3600",
            "--langs", langs, "--out", str(out)]


def _evaluate_en(run, out, langs="en"):
    evaluate.main(_args(run, out, langs))


def test_evaluating_again_keeps_the_files_the_tool_did_not_write(run, tmp_path):
    out = tmp_path / "R"
    _evaluate_en(run, out)
    (out / "my_notes.txt").write_text("mine")
    (out / "plots").mkdir()
    (out / "plots" / "mine.png").write_bytes(b"png")
    _evaluate_en(run, out)
    assert (out / "my_notes.txt").read_text() == "mine"
    assert (out / "plots" / "mine.png").read_bytes() == b"png"


def test_evaluating_again_names_the_files_it_replaces(run, tmp_path, capsys):
    out = tmp_path / "R"
    _evaluate_en(run, out)
    own = sorted(os.listdir(out))
    (out / "my_notes.txt").write_text("mine")
    capsys.readouterr()
    _evaluate_en(run, out)
    assert f"{out}: replaced the previous results' {', '.join(own)}; kept my_notes.txt\n" in \
        capsys.readouterr().out


def test_evaluating_fewer_languages_is_refused_naming_the_predictions_left_out(
        run, tmp_path, capsys):
    out = tmp_path / "R"
    _evaluate_en(run, out, langs="en,zh")
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    lines = cli.error_lines(capsys, evaluate.main, _args(run, out, "en"))
    assert lines == [f"error: --out {out} holds predictions this evaluation does not recompute "
                     f"(predictions_zh.jsonl); evaluate their languages and evaluators too, or "
                     f"choose another --out"]
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
