"""files.py: an output file (or folder) is written whole or not at all, on a real full disk too."""

import os

import pytest

import files
from tests import tiny


def test_replaces_the_file_leaves_nothing_beside_it_or_keeps_it_on_an_error(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    files.write_text(path, "new")
    assert path.read_text() == "new"
    assert os.listdir(tmp_path) == ["out.txt"]
    files.write_text(tmp_path / "secret", "token", permissions=0o600)
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600
    files.write_json(tmp_path / "x.json", {"a": "é"})
    assert (tmp_path / "x.json").read_text(encoding="utf-8") == '{\n "a": "é"\n}\n'
    # An error in the block keeps the previous file.
    path = tmp_path / "out.csv"
    path.write_text("old")
    with pytest.raises(KeyError), files.replacing(path) as f:
        f.write("half")
        raise KeyError("boom")
    assert path.read_text() == "old"
    with pytest.raises(KeyError), files.replacing(tmp_path / "new.csv") as f:
        raise KeyError("boom")
    assert sorted(os.listdir(tmp_path)) == ["out.csv", "out.txt", "secret", "x.json"]


def test_a_full_disk_leaves_the_previous_file_or_none(tmp_path):
    with tiny.small_tmpfs(tmp_path / "disk", "64k") as disk:
        (disk / "keep.txt").write_text("previous")
        with pytest.raises(OSError):
            files.write_bytes(disk / "keep.txt", b"x" * 200_000)
        with pytest.raises(OSError):
            files.write_bytes(disk / "new.bin", b"x" * 200_000)
        assert (disk / "keep.txt").read_text() == "previous"
        assert sorted(os.listdir(disk)) == ["keep.txt"]
        with pytest.raises(OSError), files.replacing_folder(disk / "results") as folder:
            with open(os.path.join(folder, "a.json"), "w") as f:
                f.write("x" * 200_000)
        assert sorted(os.listdir(disk)) == ["keep.txt"]


def test_a_folder_is_replaced_whole(tmp_path):
    target = tmp_path / "results"
    target.mkdir()
    (target / "old.json").write_text("old")
    with pytest.raises(RuntimeError), files.replacing_folder(target) as folder:
        (tmp_path / folder / "half.json").write_text("half")
        raise RuntimeError("stopped")
    assert os.listdir(target) == ["old.json"]
    with files.replacing_folder(target) as folder:
        files.write_text(os.path.join(folder, "new.json"), "new")
    assert os.listdir(target) == ["new.json"]
    assert os.listdir(tmp_path) == ["results"]
