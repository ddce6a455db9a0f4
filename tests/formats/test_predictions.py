"""Tests of formats/predictions.py: predictions files, read (fast and line by line) and written."""

import json
import os

import pytest

from formats import predictions
from tests.formats.small_files import write_lines

PREDS = [
    {"image/key": "img0", "lang": "en", "caption": "A dog running on the beach"},
    {"image/key": "img1", "lang": "en", "caption": "two cats on a sofa"},
    {"image/key": "img2", "lang": "en", "caption": "a red car"},
]


def _lines():
    return [PREDS[0], "", PREDS[1], "   ", PREDS[2]]


def test_read_predictions_fast_names_each_line(tmp_path):
    path = write_lines(tmp_path / "p.jsonl", _lines())
    fast = predictions.read(path)
    assert fast == {"en": {p["image/key"]: p["caption"] for p in PREDS[:3]}}
    assert [fast.where("en", k) for k in ("img0", "img1", "img2")] == [
        f"{path}:1", f"{path}:3", f"{path}:5"]


def test_read_predictions_line_by_line_agrees_with_the_fast_read(tmp_path):
    lines = _lines()
    fast = predictions.read(write_lines(tmp_path / "p.jsonl", lines))
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
def test_bad_lines_are_named_by_file_line(tmp_path, line, message):
    path = write_lines(tmp_path / "p.jsonl", [PREDS[0], line])
    with pytest.raises(predictions.PredictionsError, match=message):
        predictions.read(path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(predictions.PredictionsError, match="predictions file not found"):
        predictions.read(str(tmp_path / "none.jsonl"))


def test_an_empty_file_has_no_predictions(tmp_path):
    with pytest.raises(predictions.PredictionsError, match="no predictions"):
        predictions.read(write_lines(tmp_path / "empty.jsonl", [""]))


def test_file_names_of_a_language():
    assert str(predictions.file_name("zh")).endswith("predictions_zh.jsonl")
    assert predictions.file_name("zh", "vifidel") == "predictions_vifidel_zh.jsonl"


def test_one_language_written_reads_back_in_order(tmp_path):
    path = str(tmp_path / predictions.file_name("zh"))
    predictions.write(path, {"zh": {"b": "两只猫", "a": "一只狗"}})
    with open(path, encoding="utf-8") as f:
        assert f.readline() == '{"image/key": "b", "lang": "zh", "caption": "两只猫"}\n'
    assert list(predictions.read_language(path, "zh").items()) == [("b", "两只猫"), ("a", "一只狗")]


def test_read_language_refuses_another_language(tmp_path):
    path = str(tmp_path / predictions.file_name("zh"))
    predictions.write(path, {"zh": {"b": "两只猫", "a": "一只狗"}})
    with pytest.raises(predictions.PredictionsError,
                       match=r"predictions_zh.jsonl:1: field 'lang' is 'zh', expected 'en'"):
        predictions.read_language(path, "en")


def test_several_languages_written_read_back(tmp_path):
    written = {"en": {"a": "a dog", "b": ""}, "es": {"a": "un perro"}}
    predictions.write(tmp_path / "p.jsonl", written)  # several languages
    assert predictions.read(tmp_path / "p.jsonl") == written


@pytest.mark.parametrize("written, message", [
    ({"xx": {"a": "x"}}, "entry 0: image 'a': unknown language 'xx'"),
    ({"en": {"a": "x", "": "y"}}, "entry 1: \"image/key\" must be"),
    ({"en": {"a": None}}, "entry 0: image 'a': \"caption\" must be a string"),
    ({"en": {7: "x"}}, "entry 0: \"image/key\" must be a non-empty string, got 7"),
])
def test_write_refuses_bad_input_writing_nothing(tmp_path, written, message):
    path = tmp_path / "p.jsonl"
    with pytest.raises(predictions.PredictionsError, match=message):
        predictions.write(str(path), written)
    assert not path.exists()


def test_line_is_what_the_reader_reads_with_the_writers_own_fields(tmp_path):
    text = predictions.line("a1", "zh", "两只猫", image="images/a1.jpg", log_prob=-1.5)
    assert text == ('{"image/key": "a1", "lang": "zh", "caption": "两只猫", "image": '
                    '"images/a1.jpg", "log_prob": -1.5}\n')
    path = tmp_path / "p.jsonl"
    path.write_text(text + predictions.line("b2", "en", "a dog"), encoding="utf-8")
    assert predictions.read(path) == {"zh": {"a1": "两只猫"}, "en": {"b2": "a dog"}}
    with pytest.raises(predictions.PredictionsError, match="unknown language 'xx'"):
        predictions.line("a1", "xx", "x")


def _write_list(path, entries, indent=1):
    path.write_text(json.dumps(entries, ensure_ascii=False, indent=indent), encoding="utf-8")
    return path


def test_a_pycocoevalcap_results_list_is_read_by_image_id(tmp_path):
    entries = [{"image_id": "000411001ff7dd4f", "caption": "a dog"},
               {"image_id": "images/0a1b2c3d4e5f6a7b.jpg", "caption": "two cats"},
               {"image_id": "C:\\xm3600\\images\\ffeeddccbbaa9988.JPEG", "caption": "a car"},
               {"image_id": 391895, "caption": "a man", "id": 7},
               {"image_id": "1a.2b", "caption": "a dot in the key"},
               {"image_id": "00aa", "caption": "un perro", "lang": "es"}]
    path = _write_list(tmp_path / "results.json", entries)
    assert predictions.read(path, lang="en") == {
        "en": {"000411001ff7dd4f": "a dog", "0a1b2c3d4e5f6a7b": "two cats",
               "ffeeddccbbaa9988": "a car", "391895": "a man", "1a.2b": "a dot in the key"},
        "es": {"00aa": "un perro"}}
    # One line per entry (indent=None): lines still name the entry.
    one_line = _write_list(tmp_path / "one.json", entries[:1], indent=None)
    assert predictions.read(one_line, "en").where("en", "000411001ff7dd4f") == f"{one_line}:1"


@pytest.mark.parametrize("entries, message", [
    ([{"image_id": "a", "caption": "x"}], r"results.json:2: no \"lang\", and no language was "
                                          r"given for the file \(name one, e.g. --langs en\)"),
    ([{"image_id": "a", "caption": "x", "lang": "en"}, {"image_id": "b.jpg", "lang": "en"}],
     r"results.json:7: missing field 'caption'"),
    ([{"image_id": "a", "caption": "x", "lang": "en"}, "a"],
     r"results.json:7: expected an object with \"image_id\" and \"caption\", got str"),
    ([{"image_id": "a", "caption": "x", "lang": "en"},
      {"image_id": "images/a.jpg", "caption": "y", "lang": "en"}],
     r"results.json:7: second prediction for image 'a' in 'en' \(the first is at "
     r".*results.json:2\)"),
    ([{"image_id": True, "caption": "x", "lang": "en"}], r"results.json:2: \"image_id\" must be"),
    ([{"image_id": "a", "caption": 3, "lang": "en"}], r"results.json:2: .*must be a string"),
    ([], r"no predictions \(the list is empty\)"),
])
def test_a_bad_results_list_names_the_line(tmp_path, entries, message):
    with pytest.raises(predictions.PredictionsError, match=message):
        predictions.read(_write_list(tmp_path / "results.json", entries))


def test_a_results_list_with_a_key_twice_in_an_entry_or_not_json(tmp_path):
    path = tmp_path / "results.json"
    path.write_text('[{"image_id": "a", "caption": "x", "caption": "y"}]')
    with pytest.raises(predictions.PredictionsError, match="'caption' appears twice"):
        predictions.read(path, "en")
    path.write_text('[{"image_id": "a",\n "caption": }]')
    with pytest.raises(predictions.PredictionsError, match=r"results.json:2: not valid JSON"):
        predictions.read(path, "en")


def every_kind(folder, captions, lang="en"):
    """{kind: path} of files of {key: caption} in `lang` of every kind `read` takes; all but
    the captioning tool's without "lang", and their image ids file names."""
    ids = [{"image_id": f"images/{k}.jpg", "caption": c} for k, c in captions.items()]
    kinds = {
        "captioning.jsonl": "".join(predictions.line(k, lang, c, image=f"images/{k}.jpg",
                                                     log_prob=-1.0) for k, c in captions.items()),
        "results.json": json.dumps(ids, indent=1),
        "ids.jsonl": "".join(json.dumps(e) + "\n" for e in ids),
        "object.json": json.dumps(captions, indent=1),
    }
    for name, text in kinds.items():
        (folder / name).write_text(text, encoding="utf-8")
    return {name: str(folder / name) for name in kinds}


def test_every_kind_of_file_reads_the_same(tmp_path):
    keys = {"000411001ff7dd4f": "a dog", "0a1b2c3d4e5f6a7b": "two cats"}
    for name, path in every_kind(tmp_path, keys).items():
        assert predictions.read(path, "en") == {"en": keys}, name
    (tmp_path / "one_id.jsonl").write_text('{"image_id": "a.png", "caption": "x"}\n')
    (tmp_path / "one_line.json").write_text(json.dumps(keys))
    assert predictions.read(tmp_path / "one_id.jsonl", "es") == {"es": {"a": "x"}}
    assert predictions.read(tmp_path / "one_line.json", "es") == {"es": keys}
    assert predictions.read(tmp_path / "ids.jsonl", "en").where("en", "0a1b2c3d4e5f6a7b") == \
        f"{tmp_path / 'ids.jsonl'}:2"
    for name, message in [("ids.jsonl", r"ids.jsonl:1: no \"lang\", and no language"),
                          ("object.json", r"object.json: no \"lang\"")]:
        with pytest.raises(predictions.PredictionsError, match=message):
            predictions.read(tmp_path / name)
    (tmp_path / "bad.json").write_text('{"a": "x", "b": 3}')
    with pytest.raises(predictions.PredictionsError,
                       match=r"bad.json: image 'b': \"caption\" must be a string"):
        predictions.read(tmp_path / "bad.json", "en")


def _en_es_files(tmp_path):
    en = _write_list(tmp_path / "en.json", [{"image_id": "a", "caption": "a dog"}])
    es = write_lines(tmp_path / "es.jsonl", [{"image/key": "a", "lang": "es",
                                              "caption": "un perro"}])
    return en, es


def test_several_files_are_merged(tmp_path):
    en, es = _en_es_files(tmp_path)
    merged = predictions.read_files([en, es], langs=["en"])
    assert merged == {"en": {"a": "a dog"}, "es": {"a": "un perro"}}
    assert merged.where("es", "a") == f"{es}:1"


def test_a_prediction_in_two_files_is_refused(tmp_path):
    en, _ = _en_es_files(tmp_path)
    again = write_lines(tmp_path / "again.jsonl", [{"image_id": "b", "caption": "x"},
                                                   {"image_id": "a.jpg", "caption": "y"}])
    with pytest.raises(predictions.PredictionsError,
                       match=rf"again.jsonl:2: second prediction for image 'a' in 'en' \(the "
                             rf"first is at {en}:2\)"):
        predictions.read_files([en, again], langs=["en"])


def test_a_file_without_lang_needs_one_language(tmp_path):
    en, es = _en_es_files(tmp_path)
    with pytest.raises(predictions.PredictionsError, match="no \"lang\""):
        predictions.read_files([en, es], langs=["en", "es"])


@pytest.mark.parametrize("kind, make", [("a FIFO \\(named pipe\\)", os.mkfifo),
                                        ("a folder", os.mkdir)])
def test_a_fifo_or_a_folder_as_predictions_says_what_it_is(tmp_path, kind, make):
    path = tmp_path / "preds.jsonl"
    make(path)
    with pytest.raises(predictions.PredictionsError,
                       match=rf"predictions file {path} is {kind}, not a file$"):
        predictions.read(str(path))
