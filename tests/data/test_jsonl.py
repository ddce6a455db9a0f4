"""JSON Lines reading: plain and compressed files, errors at file:line."""

import bz2
import gzip
import os

import msgspec
import pytest

from data import jsonl


@pytest.mark.parametrize("name, opener", [("a.jsonl", open), ("a.jsonl.bz2", bz2.open),
                                          ("a.jsonl.gz", gzip.open)])
def test_read_objects_names_each_line(tmp_path, name, opener):
    path = tmp_path / name
    with opener(path, "wb") as f:
        f.write(b'{"a": 1}\n\n{"b": "\xc3\xa9"}\n{"c": "\xff"}\n')
    objects = jsonl.read_objects(path)
    assert next(objects) == (f"{path}:1", {"a": 1})
    assert next(objects) == (f"{path}:3", {"b": "é"})
    with pytest.raises(jsonl.FormatError, match=rf"{name}:4: not UTF-8"):
        next(objects)


def test_a_line_not_an_object_is_an_error(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text('[1]\n')
    with pytest.raises(ValueError, match=r"b.jsonl:1: expected a JSON object, got list"):
        list(jsonl.read_objects(path, error=ValueError))


def test_a_line_not_json_is_an_error(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text('{"a": \n')
    with pytest.raises(jsonl.FormatError, match=r"b.jsonl:1: not valid JSON"):
        list(jsonl.read_objects(path))


class _Pair(msgspec.Struct):
    a: int
    b: str


def _typed_lines(tmp_path):
    """(path, lines decoded) of a file with blank lines, CRLF and an extra field."""
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"a": 1, "b": "x"}\n\n  \r\n{"b": "\xc3\xa9", "a": 2, "extra": [1]}\r\n')
    return path, jsonl.decode_lines(path, msgspec.json.Decoder(_Pair))


def test_decode_lines_types_every_line(tmp_path):
    _, lines = _typed_lines(tmp_path)
    assert list(lines) == [_Pair(1, "x"), _Pair(2, "é")]


def test_decode_lines_numbers_every_line(tmp_path):
    _, lines = _typed_lines(tmp_path)
    assert lines.linenos == [1, 4]


def test_decode_lines_reads_a_gzip_file_as_the_plain_one(tmp_path):
    path, lines = _typed_lines(tmp_path)
    gz = tmp_path / "c.jsonl.gz"
    with gzip.open(gz, "wb") as f:
        f.write(path.read_bytes())
    assert list(jsonl.decode_lines(gz, msgspec.json.Decoder(_Pair))) == list(lines)


def test_decode_lines_of_an_empty_file_is_empty(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert list(jsonl.decode_lines(empty, msgspec.json.Decoder(_Pair))) == []


@pytest.mark.parametrize("content", [
    b'{"a": 1, "b": "x"} {"a": 2, "b": "y"}\n',    # two objects on a line
    b'{"a": 1,\n "b": "x"}\n',                      # one object over two lines
    b'{"a": 1, "b": "\xff"}\n',                     # not UTF-8
    b'{"a": 1, "b": 2}\n',                          # of another type
    b'{"a": 1}\n',                                  # a field missing
    b'{"a": 1, "b": "x", "c": NaN}\n',              # JSON only `json` reads
    b'{"a": 1, "b": "\\ud800"}\n',                  # a lone surrogate, ditto
    b'\xe3\x80\x80\n',                              # Unicode whitespace only
])
def test_decode_lines_gives_up_where_the_slow_path_must_decide(tmp_path, content):
    path = tmp_path / "d.jsonl"
    path.write_bytes(content)
    assert jsonl.decode_lines(path, msgspec.json.Decoder(_Pair)) is None


def _check(where, line):
    obj = jsonl.parse_line(line, where)
    if obj is not None and not isinstance(obj.get("a"), int):
        raise jsonl.FormatError(f"{where}: no integer a")
    return None if obj is None else _Pair(obj["a"], str(obj.get("b")))


@pytest.mark.parametrize("name, opener, external", [
    ("s.jsonl", open, True), ("s.jsonl.gz", gzip.open, True), ("s.jsonl.bz2", bz2.open, True),
    ("s.jsonl.bz2", bz2.open, False)])
def test_line_stream_reads_across_chunks_of_every_compression(tmp_path, name, opener, external):
    rows = [f'{{"a": {i}, "b": "{"é" * (i % 7)}"}}' for i in range(300)]
    rows[5] = '{"a": 5, "b": 6}'  # msgspec rejects it (b is no string); the fallback takes it.
    rows[7] = "  "
    path = tmp_path / name
    with opener(path, "wb") as f:
        f.write(("\n".join(rows) + "\n\u3000").encode("utf-8"))  # Unicode blank last line.
    stream = jsonl.LineStream(path, msgspec.json.Decoder(_Pair), _check, chunk_size=64,
                              external=external)
    got = list(stream)
    assert [n for n, _ in got] == [i + 1 for i in range(300) if i != 7]
    assert got[5] == (6, _Pair(5, "6")) and got[9] == (11, _Pair(10, "ééé"))
    assert stream.lines == 301 and stream.position == stream.size == path.stat().st_size


def _bad_second_line(tmp_path):
    path = tmp_path / "t.jsonl.bz2"
    with bz2.open(path, "wb") as f:
        f.write(b'{"a": 1, "b": "x"}\n{"a": "one"}\n')
    return path


@pytest.mark.parametrize("external", [True, False])
def test_line_stream_names_a_bad_line(tmp_path, external):
    path = _bad_second_line(tmp_path)
    stream = jsonl.LineStream(path, msgspec.json.Decoder(_Pair), _check, external=external)
    with pytest.raises(jsonl.FormatError, match=r"t.jsonl.bz2:2: no integer a"):
        list(stream)


@pytest.mark.parametrize("external", [True, False])
def test_line_stream_names_a_broken_file(tmp_path, external):
    path = _bad_second_line(tmp_path)
    path.write_bytes(path.read_bytes()[:30])
    stream = jsonl.LineStream(path, msgspec.json.Decoder(_Pair), _check, external=external)
    with pytest.raises(jsonl.FormatError, match=r"t.jsonl.bz2: not a readable"):
        list(stream)


# A key twice in one object (issue 21 item 9): JSON parsers keep the last value silently.

@pytest.mark.parametrize("line, key", [
    (b'{"a": 1, "b": "x", "a": 2}', "a"),                        # at the top
    (b'{"a": 1, "b": {"c": [1], "d": 0, "c": [2]}}', "c"),        # nested
    (b'{"a": 1, "b": "x", "\\u0061": 2}', "a"),                   # the same key, escaped
])
def test_a_repeated_key_is_an_error_at_its_line(tmp_path, line, key):
    path = tmp_path / "dup.jsonl"
    path.write_bytes(b'{"a": 0, "b": "ok"}\n' + line + b"\n")
    with pytest.raises(jsonl.FormatError,
                       match=rf"dup.jsonl:2: key '{key}' appears twice in one object"):
        list(jsonl.read_objects(path))
    # The fast path leaves it to the slow one, with or without the count of keys.
    decoder = msgspec.json.Decoder(_Pair if key == "a" else dict)
    assert jsonl.decode_lines(path, decoder) is None
    assert jsonl.decode_lines(path, decoder, count_keys=lambda lines: 2 * len(lines)) is None


def _counted_scans(monkeypatch):
    """The list that gets an item for each scan for repeated keys."""
    scans = []
    scan = jsonl._has_repeated_key
    monkeypatch.setattr(jsonl, "_has_repeated_key", lambda data: scans.append(1) or scan(data))
    return scans


def two_keys(lines):
    return 2 * len(lines)


def test_decode_lines_scans_when_a_colon_is_inside_a_string(tmp_path, monkeypatch):
    path = tmp_path / "ok.jsonl"
    path.write_bytes(b'{"a": 1, "b": "x"}\n{"a": 2, "b": "at 10:30"}\n')
    scans = _counted_scans(monkeypatch)
    assert list(jsonl.decode_lines(path, msgspec.json.Decoder(_Pair), two_keys)) == [
        _Pair(1, "x"), _Pair(2, "at 10:30")]
    assert scans == [1]  # A colon inside a string: scanned, and no repeated key.


def test_decode_lines_does_not_scan_when_the_colons_are_the_keys(tmp_path, monkeypatch):
    path = tmp_path / "ok.jsonl"
    scans = _counted_scans(monkeypatch)
    path.write_bytes(b'{"a": 1, "b": "x"}\n{"a": 2, "b": "y"}\n')
    assert len(jsonl.decode_lines(path, msgspec.json.Decoder(_Pair), two_keys)) == 2
    assert scans == []  # The colons are the keys: no scan.


def test_a_predictions_file_refuses_a_repeated_key(tmp_path):
    from formats import predictions

    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"image/key": "img0", "lang": "en", "caption": "a dog"}\n'
                     '{"image/key": "img1", "lang": "en", "caption": "a cat", '
                     '"caption": "a cow"}\n')
    with pytest.raises(predictions.PredictionsError,
                       match=r"preds.jsonl:2: key 'caption' appears twice in one object"):
        predictions.read(preds)


def test_a_references_file_refuses_a_repeated_key(tmp_path):
    from data.releases import xm3600
    from tests.tools.test_cider import write_references

    refs = write_references(tmp_path / "captions.jsonl")
    assert xm3600.read_references(refs).get("en")[0]  # Well-formed: read fast.
    lines = open(refs, encoding="utf-8").read().splitlines()
    lines[1] = lines[1].replace('"caption": [', '"caption": ["x"], "caption": [', 1)
    open(refs, "w", encoding="utf-8").write("\n".join(lines) + "\n")
    with pytest.raises(jsonl.FormatError,
                       match=r"captions.jsonl:2: key 'caption' appears twice in one object"):
        xm3600.read_references(refs)


def test_a_json_object_file_refuses_a_repeated_key(tmp_path):
    from formats import json_object

    path = tmp_path / "scores.json"
    path.write_text('{"step": 1,\n "step": 2}\n')
    with pytest.raises(ValueError, match=r"scores.json: key 'step' appears twice in one object"):
        json_object.read(str(path), ValueError, "scores file")


# Nesting deeper than Python's recursion limit (issue 55 point 5): `json` and msgspec raise
# RecursionError; `jsonl.loads`, the one parse, turns it into the reader's error.

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_line_nested_too_deep_is_an_error_at_its_line(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"a": 1}\n{"a": ' + DEEP + "}\n")
    with pytest.raises(jsonl.FormatError, match=r"deep.jsonl:2: not readable JSON \(nested too "
                                                r"deep: Python's reader stops at about \d+ "):
        list(jsonl.read_objects(path))


def test_decode_lines_leaves_a_line_nested_too_deep_to_the_slow_path(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"a": 1, "b": "x"}\n{"a": 1, "b": "x", "c": ' + DEEP + "}\n")
    assert jsonl.decode_lines(path, msgspec.json.Decoder(_Pair)) is None


def _deep_file_readers():
    from data.releases import coco35l, xm3600
    from evaluation.cider import df
    from formats import json_object, predictions
    from tools.humaneval import session
    return {
        "predictions list": ("preds.json", DEEP, predictions.read),
        "predictions lines": ("preds.jsonl", '{"image/key": ' + DEEP + "}\n", predictions.read),
        "references": ("captions.jsonl", '{"image/key": ' + DEEP + "}\n",
                       xm3600.read_references),
        "json object": ("scores.json", '{"a": ' + DEEP + "}",
                        lambda p: json_object.read(p, jsonl.FormatError, "scores file")),
        "document frequencies": ("df.json", DEEP, df.load_document_frequencies),
        "session": ("session.json", DEEP, lambda p: session.load(os.path.dirname(p))),
        "karpathy": ("dataset_coco.json", '{"other": ' + DEEP + ', "images": []}',
                     coco35l.read_karpathy),
    }


@pytest.mark.parametrize("kind", list(_deep_file_readers()))
def test_every_json_reader_refuses_a_file_nested_too_deep_naming_it(tmp_path, kind):
    import errors
    name, text, read = _deep_file_readers()[kind]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(errors.InputError, match=rf"{name}(:1)?: not readable JSON \(nested too "):
        read(str(path))
