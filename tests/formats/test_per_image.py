"""Tests of formats/per_image.py: per-image scores, read strictly, written after checking."""

import math

import numpy as np
import pytest

from formats import per_image
from tools.analysis import compare


@pytest.mark.parametrize("line, message", [
    ("{not json", "per_image.jsonl:2: not valid JSON"),
    ('["a"]', "per_image.jsonl:2: expected a JSON object"),
    ('{"lang": "en", "score": 1}', "per_image.jsonl:2: missing or empty string field 'image/key'"),
    ('{"image/key": "b", "lang": "xx", "score": 1}', "per_image.jsonl:2: unknown language 'xx'"),
    ('{"image/key": "b", "lang": "en", "score": "1"}', "per_image.jsonl:2: field 'score'"),
    ('{"image/key": "b", "lang": "en", "score": NaN}', "per_image.jsonl:2: field 'score'"),
    ('{"image/key": "a", "lang": "en", "score": 1}', "per_image.jsonl:2: image 'a' in language"),
])
def test_malformed_line_is_reported_with_its_file_line(tmp_path, line, message):
    path = tmp_path / "per_image.jsonl"
    path.write_text('{"image/key": "a", "lang": "en", "score": 0.5}\n' + line + "\n")
    with pytest.raises(per_image.PerImageError) as info:
        per_image.read(path)
    assert message in str(info.value)


def _written_folder(tmp_path):
    scores = {"en": {"k1": 0.5, "k2": 1.0}, "de": {"k1": 0.25}}
    (tmp_path / "a").mkdir()
    per_image.write(tmp_path / "a" / per_image.file_name(), scores)
    return scores


def test_a_written_file_reads_back(tmp_path):
    scores = _written_folder(tmp_path)
    assert per_image.read(tmp_path / "a" / "per_image.jsonl") == scores


def test_compare_reads_a_written_file(tmp_path):
    scores = _written_folder(tmp_path)
    assert compare.read_per_image(tmp_path / "a") == scores


def test_numpy_scores_read_back(tmp_path):
    per_image.write(tmp_path / "b.jsonl", {"en": {"k1": np.float32(0.5)}})
    assert per_image.read(tmp_path / "b.jsonl") == {"en": {"k1": 0.5}}


def test_an_evaluators_file_name():
    assert per_image.file_name("vifidel") == "per_image_vifidel.jsonl"


def test_an_undefined_score_has_no_line(tmp_path):
    # An undefined score has no line.
    per_image.write(tmp_path / "p.jsonl", {"en": {"a": 0.5, "b": math.nan, "c": 0.0}})
    assert per_image.read(tmp_path / "p.jsonl") == {"en": {"a": 0.5, "c": 0.0}}


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(per_image.PerImageError, match="per-image scores not found"):
        per_image.read(tmp_path / "none.jsonl")


def test_an_empty_file_is_named(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(per_image.PerImageError, match="empty.jsonl: no scores"):
        per_image.read(tmp_path / "empty.jsonl")


@pytest.mark.parametrize("scores, message", [
    ({"en": {"a": 0.5, "b": None}}, "per_image entry 1: score is not a finite number"),
    ({"en": {"a": math.inf}}, "per_image entry 0: score is not a finite number"),
    ({"xx": {"a": 0.5}}, "per_image entry 0: unknown language 'xx'"),
])
def test_bad_scores_write_nothing(tmp_path, scores, message):
    with pytest.raises(per_image.PerImageError, match=message):
        per_image.write(tmp_path / "p.jsonl", scores)
    assert not (tmp_path / "p.jsonl").exists()
