"""Tests of benchmarks/caption_speed.py's handling of bad input (one error line, status 2)."""

import pytest

from benchmarks import caption_speed
from tests.cli import error_line


@pytest.mark.parametrize("args, message", [
    (["--workdir", "{tmp}", "--images", "{tmp}/*.jpg"], "no file matches the pattern"),
    (["--workdir", "{tmp}", "--images", "x.jpg", "--num_images", "2"],
     "--images has 1 images, fewer than --num_images 2"),
    (["--workdir", "{tmp}/run", "--images", "x.jpg", "--num_images", "1"],
     "run folder {tmp}/run not found"),
    (["--workdir", "{tmp}", "--images", "x.jpg", "--repeats", "0"], "must be >= 1"),
])
def test_bad_input_exits_2_with_one_error_line(args, message, tmp_path, capsys):
    err = error_line(capsys, caption_speed.main, [a.format(tmp=tmp_path) for a in args])
    assert message.format(tmp=tmp_path) in err
