"""Tests of formats/predictions.py: predictions files, read (fast and line by line) and written."""

import json

import pytest

from formats import predictions

PREDS = [
    {"image/key": "img0", "lang": "en", "caption": "A dog running on the beach"},
    {"image/key": "img1", "lang": "en", "caption": "two cats on a sofa"},
    {"image/key": "img2", "lang": "en", "caption": "a red car"},
]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return str(path)


def test_read_predictions_fast_and_line_by_line_agree(tmp_path):
    lines = [PREDS[0], "", PREDS[1], "   ", PREDS[2]]
    path = write_lines(tmp_path / "p.jsonl", lines)
    fast = predictions.read(path)
    assert fast == {"en": {p["image/key"]: p["caption"] for p in PREDS[:3]}}
    assert [fast.where("en", k) for k in ("img0", "img1", "img2")] == [
        f"{path}:1", f"{path}:3", f"{path}:5"]
    # NaN in an extra field: only `json` reads the line, so the file is read line by line.
    slow_path = write_lines(tmp_path / "q.jsonl", lines + [
        '{"image/key": "img0", "lang": "es", "caption": "x", "p": NaN}'])
    slow = predictions.read(slow_path)
    assert slow == {**fast, "es": {"img0": "x"}}
    assert slow.where("en", "img2") == f"{slow_path}:5"
    assert slow.where("es", "img0") == f"{slow_path}:6"


@pytest.mark.parametrize("line, message", [
    ('{"image/key": "img9", "lang": "en"}', r"p.jsonl:2: missing field 'caption'"),
    ('{"image/key": "", "lang": "en", "caption": "x"}', r"p.jsonl:2: \"image/key\" must be"),
    ('{"image/key": "img9", "lang": "xx", "caption": "x"}', r"p.jsonl:2: image 'img9': unknown "
                                                             r"language 'xx'"),
    ('{"image/key": "img9", "lang": "en", "caption": 3}', r"p.jsonl:2: .*must be a string"),
    ('{"image/key": "img0", "lang": "en", "caption": "again"}',
     r"p.jsonl:2: second prediction for image 'img0' in 'en' \(the first is at .*p.jsonl:1\)"),
    ("[1]", r"p.jsonl:2: expected a JSON object"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = write_lines(tmp_path / "p.jsonl", [PREDS[0], line])
    with pytest.raises(predictions.PredictionsError, match=message):
        predictions.read(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(predictions.PredictionsError, match="predictions file not found"):
        predictions.read(str(tmp_path / "none.jsonl"))
    with pytest.raises(predictions.PredictionsError, match="no predictions"):
        predictions.read(write_lines(tmp_path / "empty.jsonl", [""]))


def test_write_and_read_one_language(tmp_path):
    path = str(tmp_path / predictions.file_name("zh"))
    assert path.endswith("predictions_zh.jsonl")
    assert predictions.file_name("zh", "vifidel") == "predictions_vifidel_zh.jsonl"
    predictions.write(path, {"zh": {"b": "两只猫", "a": "一只狗"}})
    with open(path, encoding="utf-8") as f:
        assert f.readline() == '{"image/key": "b", "lang": "zh", "caption": "两只猫"}\n'
    assert list(predictions.read_language(path, "zh").items()) == [("b", "两只猫"),
                                                                   ("a", "一只狗")]
    with pytest.raises(predictions.PredictionsError,
                       match=r"predictions_zh.jsonl:1: field 'lang' is 'zh', expected 'en'"):
        predictions.read_language(path, "en")


def test_several_languages_round_trip(tmp_path):
    written = {"en": {"a": "a dog", "b": ""}, "es": {"a": "un perro"}}
    predictions.write(tmp_path / "p.jsonl", written)
    assert predictions.read(tmp_path / "p.jsonl") == written


@pytest.mark.parametrize("written, message", [
    ({"xx": {"a": "x"}}, "entry 0: image 'a': unknown language 'xx'"),
    ({"en": {"a": "x", "": "y"}}, "entry 1: \"image/key\" must be"),
    ({"en": {"a": None}}, "entry 0: image 'a': \"caption\" must be a string"),
    ({"en": {7: "x"}}, "entry 0: \"image/key\" must be a non-empty string, got 7"),
])
def test_write_refuses_bad_input_and_writes_nothing(tmp_path, written, message):
    path = tmp_path / "p.jsonl"
    with pytest.raises(predictions.PredictionsError, match=message):
        predictions.write(str(path), written)
    assert not path.exists()
