"""benchmarks/input_pipeline.py's handling of bad input: one error line, status 2, before any
work (the benchmark itself writes a synthetic release and runs minutes: it is not run here)."""

import pytest

from benchmarks import input_pipeline


@pytest.mark.parametrize("workers, message", [
    ("2,3", "error: --workers 2,3: starts with 1,2 (the prediction's basis)"),
    ("1,x", "error: argument --workers: expected an integer, got 'x'"),
    ("1,2,0", "error: argument --workers: expected an integer >= 1, got 0"),
])
def test_bad_workers_is_one_error_line_and_status_2(workers, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        input_pipeline.main(["--workers", workers, "--work_dir", str(tmp_path / "work")])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(message), err
    assert not (tmp_path / "work").exists()  # Refused before any work.
