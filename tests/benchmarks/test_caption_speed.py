"""Tests of benchmarks/caption_speed.py's handling of bad input (one error line, status 2)."""

import pytest

import errors
from benchmarks import caption_speed


@pytest.mark.parametrize("args, message", [
    (["--workdir", "{tmp}", "--images", "{tmp}/*.jpg"], "no file matches the pattern"),
    (["--workdir", "{tmp}", "--images", "x.jpg", "--num_images", "2"],
     "--images has 1 images, fewer than --num_images 2"),
    (["--workdir", "{tmp}/run", "--images", "x.jpg", "--num_images", "1"],
     "run folder {tmp}/run not found"),
    (["--workdir", "{tmp}", "--images", "x.jpg", "--repeats", "0"], "must be >= 1"),
])
def test_bad_input_is_one_error_line_and_status_2(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        errors.run_main(caption_speed.main, [a.format(tmp=tmp_path) for a in args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert message.format(tmp=tmp_path) in err
