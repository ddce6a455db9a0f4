"""Tests of data/releases/xm3600.py: the captions.jsonl reader and its error messages."""

import json

import pytest

from data.releases import xm3600


def _line(key="k1", **langs):
    langs = langs or {"en": ["a red circle"]}
    obj = {"image/key": key, "image/locale": "en"}
    for lang, caps in langs.items():
        obj[lang] = {"caption": caps, "caption/tokenized": caps,
                     "caption/tokenized/lowercase": [c.lower() for c in caps]}
    return json.dumps(obj, ensure_ascii=False)


def _write(tmp_path, lines):
    path = tmp_path / "captions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_reads_the_captions_file(tmp_path):
    path = _write(tmp_path, [_line("k1", en=["A dog"], zh=["一只狗"]), "", _line("k2")])
    records = xm3600.read_captions(path)
    assert [r.key for r in records] == ["k1", "k2"]
    assert records[0].captions == {"en": ["A dog"], "zh": ["一只狗"]}
    assert xm3600.references(records, "zh") == (["k1"], [["一只狗"]])
    assert xm3600.image_path("/x", "k1") == "/x/images/k1.jpg"


@pytest.mark.parametrize("bad,message", [
    ("{not json", r"captions.jsonl:2: not valid JSON"),
    ("[1, 2]", r"captions.jsonl:2: expected a JSON object, got list"),
    (json.dumps({"image/locale": "en"}), r"captions.jsonl:2: missing or empty string field "
                                          r"'image/key'"),
    (_line("k9", xx=["?"]), r"captions.jsonl:2: image 'k9' has unknown language key 'xx'; "
                            r"known: ar, bn"),
    (_line("k1"), r"captions.jsonl:2: image key 'k1' repeats line 1"),
])
@pytest.mark.parametrize("read", [xm3600.read_captions, xm3600.read_references])
def test_malformed_lines_are_named_by_file_line(tmp_path, bad, message, read):
    path = _write(tmp_path, [_line("k1"), bad])
    with pytest.raises(xm3600.FormatError, match=message):
        read(path)


def _tokenized_line(key, lang, captions, tokenized):
    return json.dumps({"image/key": key, "image/locale": lang,
                       lang: {"caption": captions, "caption/tokenized": tokenized}})


@pytest.mark.parametrize("field", ["caption", "caption/tokenized"])
@pytest.mark.parametrize("odd_line", [
    None,
    # JSON that only the slow path reads (NaN, a lone surrogate): same result.
    '{"image/key": "k4", "image/locale": "en", "en": {"caption": ["x"], "n": NaN}}',
    '{"image/key": "k4", "image/locale": "en", "en": {"caption": ["\\udc80 x"]}}',
])
def test_read_references_is_references_of_read_captions(tmp_path, field, odd_line):
    lines = [_line("k1", en=["A dog", "Dogs"], zh=["一只狗"]), "",
             _tokenized_line("k2", "en", ["A cat."], ["A cat ."]),
             json.dumps({"image/key": "k3", "image/locale": "sw",
                         "sw": {"caption": ["Paka"]}})]
    path = _write(tmp_path, lines + ([odd_line] if odd_line else []))
    table = xm3600.read_references(path, field)
    records = xm3600.read_captions(path)
    assert table.field == field
    assert table.keys == [r.key for r in records]
    assert set(table.by_lang) == {"en", "zh", "sw"}
    for lang in ("en", "zh", "sw", "fr"):
        assert table.get(lang) == xm3600.references(records, lang, field)
    assert table == xm3600.references_by_language(records, field)


@pytest.mark.parametrize("read", [xm3600.read_captions, xm3600.read_references])
def test_an_empty_file_has_no_records(tmp_path, read):
    with pytest.raises(xm3600.FormatError, match="no records"):
        read(_write(tmp_path, [""]))


@pytest.mark.parametrize("read", [xm3600.read_captions, xm3600.read_references])
def test_a_missing_file_is_named(tmp_path, read):
    with pytest.raises(FileNotFoundError, match="nothing.jsonl"):
        read(str(tmp_path / "nothing.jsonl"))


def test_a_fifo_as_the_captions_file_says_what_it_is(tmp_path):
    import os
    path = tmp_path / "captions.jsonl"
    os.mkfifo(path)  # Opened, it would wait for a writer forever.
    with pytest.raises(xm3600.FormatError, match=r"XM3600 captions file .* is a FIFO \(named "
                                                 r"pipe\), not a file$"):
        xm3600.read_references(str(path))
