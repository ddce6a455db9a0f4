"""JSON Lines reading: plain and compressed files, errors at file:line."""

import bz2
import gzip

import pytest

from data import jsonl


@pytest.mark.parametrize("name, opener", [("a.jsonl", open), ("a.jsonl.bz2", bz2.open),
                                          ("a.jsonl.gz", gzip.open)])
def test_objects_and_errors_name_the_line(tmp_path, name, opener):
    path = tmp_path / name
    with opener(path, "wb") as f:
        f.write(b'{"a": 1}\n\n{"b": "\xc3\xa9"}\n{"c": "\xff"}\n')
    objects = jsonl.read_objects(path)
    assert next(objects) == (f"{path}:1", {"a": 1})
    assert next(objects) == (f"{path}:3", {"b": "é"})
    with pytest.raises(jsonl.FormatError, match=rf"{name}:4: not UTF-8"):
        next(objects)


def test_not_json_and_not_an_object(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text('[1]\n')
    with pytest.raises(ValueError, match=r"b.jsonl:1: expected a JSON object, got list"):
        list(jsonl.read_objects(path, error=ValueError))
    path.write_text('{"a": \n')
    with pytest.raises(jsonl.FormatError, match=r"b.jsonl:1: not valid JSON"):
        list(jsonl.read_objects(path))
