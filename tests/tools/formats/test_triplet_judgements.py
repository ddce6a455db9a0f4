"""Tests of tools/formats/triplet_judgements.py: the CIDEr paper's triplet judgements as JSONL."""

import json

import pytest

from tests.formats.small_files import write_lines as _write
from tools.formats import triplet_judgements


def _line(image="1", reference="a dog", b="a dog runs", c="a cat", choice="b", **extra):
    return {"image/key": image, "reference": reference, "b": b, "c": c, "choice": choice, **extra}


def test_read_gives_the_chosen_caption_with_the_pairs_kind(tmp_path):
    path = _write(tmp_path / "t.jsonl", [_line(kind="HM", lang="fr"),
                                         _line(b="a cat", c="a dog runs", choice="c", image=2)])
    first, second = triplet_judgements.read(path)
    assert (first.image, first.choice, first.kind, first.lang) == ("1", "a dog runs", "HM", "fr")
    assert (second.image, second.choice, second.kind) == ("2", "a dog runs", None)
    assert second.where == f"{path}:2"


@pytest.mark.parametrize("row, message", [
    ({"image/key": "1", "reference": "r", "b": "x"}, r"t.jsonl:2: missing field\(s\) c, choice"),
    (_line(choice="a"), r"t.jsonl:2: field 'choice': 'a' is not 'b' or 'c'"),
    (_line(c="a dog runs"), r"t.jsonl:2: candidates 'b' and 'c' are the same caption"),
    (_line(reference=" "), r"t.jsonl:2: field 'reference' must be a non-empty caption"),
    (_line(lang="xx"), r"t.jsonl:2: field 'lang': unknown language 'xx'"),
    (_line(kind="HI"), r"t.jsonl:2: the pair of image '1' is of kind 'HI' here and 'HC' at "
                       r".*t.jsonl:1"),
])
def test_bad_lines_name_the_line_field(tmp_path, row, message):
    path = _write(tmp_path / "t.jsonl", [_line(kind="HC"), row])
    with pytest.raises(triplet_judgements.TripletError, match=message):
        triplet_judgements.read(path)


def test_write_checks_first_writing_nothing(tmp_path):
    path = tmp_path / triplet_judgements.file_name()
    with pytest.raises(triplet_judgements.TripletError, match=r"entry 1: field 'choice'"):
        triplet_judgements.write(path, [_line(), _line(choice="x")])
    assert not path.exists()


def test_written_judgements_read_back(tmp_path):
    path = tmp_path / triplet_judgements.file_name()
    triplet_judgements.write(path, [_line(kind="MM", extra="dropped")])
    assert json.loads(path.read_text()) == _line(kind="MM")
    assert triplet_judgements.read(path)[0].kind == "MM"


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(triplet_judgements.TripletError, match="not found"):
        triplet_judgements.read(tmp_path / "none.jsonl")
