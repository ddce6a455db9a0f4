"""benchmarks/input_pipeline.py's handling of bad input (one error line, status 2, before any
work) and its medians over rounds (the benchmark itself writes a synthetic release and runs
minutes: it is not run here)."""

import pytest

from benchmarks import input_pipeline


@pytest.mark.parametrize("args, message", [
    (["--workers", "2,3"], "error: --workers 2,3: starts with 1,2 (the prediction's basis)"),
    (["--workers", "1,x"], "error: argument --workers: expected an integer, got 'x'"),
    (["--workers", "1,2,0"], "error: argument --workers: expected an integer >= 1, got 0"),
    (["--rounds", "0"], "error: argument --rounds: expected an integer >= 1, got 0"),
    (["--batches", "1"], "error: argument --batches: expected an integer >= 4, got 1"),
])
def test_bad_arguments_exit_2_with_one_error_line(args, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        input_pipeline.main([*args, "--work_dir", str(tmp_path / "work")])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(message), err
    assert not (tmp_path / "work").exists()  # Refused before any work.


def test_medians_are_per_worker_count_over_the_rounds_with_the_last_load():
    def figures(rate, load):
        return {"rate": rate, "worker_cpu": 1 / rate, "own_cpu": rate / 1e7, "load": load}

    rounds = [[figures(400, "a"), figures(800, "b")],
              [figures(420, "c"), figures(780, "d")],
              [figures(410, "e"), figures(840, "f")]]
    one, two = input_pipeline.medians(rounds)
    assert one == {"rate": 410, "worker_cpu": 1 / 410, "own_cpu": 410 / 1e7, "load": "e"}
    assert two == {"rate": 800, "worker_cpu": 1 / 800, "own_cpu": 800 / 1e7, "load": "f"}
