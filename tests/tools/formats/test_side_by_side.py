"""Tests of tools/formats/side_by_side.py: the paper's side_by_side.csv, read and written."""

import pytest

from tests.formats.small_files import write_text as _write
from tools.formats import side_by_side

HEADER = "m2,m1,lang,set,delta_sxs,delta_cider_xm600,delta_cider_xm3600,delta_cider_coco_dev\n"
ROWS = ["A,B,en,core,-10.0,-0.10,-0.12,0.01"]


@pytest.mark.parametrize("text, message", [
    ("m2,m1,lang,delta_sxs,delta_cider_xm3600\nA,B,en,1,0.1\n", "missing column(s) set"),
    ("m2,m1,lang,set,delta_sxs\nA,B,en,core,1\n", "delta_cider_*"),
    (HEADER + ROWS[0] + "\nA,B,de,ext,-3.0,x,-0.02,0.03\n", "sxs.csv:3: column delta_cider_xm600"),
    (HEADER + "A,B,de,ext,lots,0.1,-0.02,0.03\n", "sxs.csv:2: column delta_sxs"),
    (HEADER + "A,B,de,extended,-3.0,0.1,-0.02,0.03\n", "sxs.csv:2: column set: unknown value"),
    (HEADER + "A,B,xx,ext,-3.0,0.1,-0.02,0.03\n", "sxs.csv:2: column lang"),
    (HEADER + "A,B,de,ext,-3.0,0.1,-0.02\n", "sxs.csv:2: fewer cells"),
    (HEADER + "A,B,de,ext,-3.0,inf,-0.02,0.1\n", "not a finite number"),
    (HEADER + "A,B,de,ext,1_0,0.1,-0.02,0.1\n", "sxs.csv:2: column delta_sxs: not a finite "
                                                 "number: '1_0'"),
    (HEADER + "A,B,de,ext,-3.0, 0.2,-0.02,0.1\n", "sxs.csv:2: column delta_cider_xm600: not a "
                                                  "finite number: ' 0.2'"),
    (HEADER, "no evaluations"),
    (HEADER + ROWS[0] + "\n" + ROWS[0] + "\n",
     "sxs.csv:3: A vs B in 'en' again (first at line 2)"),
    (HEADER + ROWS[0] + "\nB,A,en,core,10.0,0.10,0.12,-0.01\n",
     "sxs.csv:3: B vs A in 'en' again (first at line 2)"),
    ("m2,m1,lang,set,delta_sxs,delta_sxs,delta_cider_xm3600\n", "sxs.csv:1: column 'delta_sxs' "
                                                               "appears twice in the header"),
])
def test_bad_input_names_what_is_wrong(tmp_path, text, message):
    with pytest.raises(side_by_side.SideBySideError) as info:
        side_by_side.read(_write(tmp_path, text))
    assert message in str(info.value)


def test_write_reads_back_with_missing_values(tmp_path):
    rows = [{"m2": "B", "m1": "A", "lang": "hi", "set": side_by_side.set_of("hi"),
             "delta_sxs": 12.345, "delta_cider_xm600": None, "delta_cider_xm3600": 0.01234,
             "delta_cider_coco_dev": -0.5}]
    path = side_by_side.write(tmp_path / side_by_side.FILE_NAME, rows)
    assert path.read_text().splitlines() == [HEADER.strip(), "B,A,hi,core,12.35,,0.0123,-0.5000"]
    (evaluation,), columns = side_by_side.read(path)
    assert columns == side_by_side.COLUMNS[5:]
    assert (evaluation.m2, evaluation.set, evaluation.delta_sxs) == ("B", "core", 12.35)
    assert evaluation.deltas == {"delta_cider_xm600": None, "delta_cider_xm3600": 0.0123,
                                 "delta_cider_coco_dev": -0.5}


@pytest.mark.parametrize("change, message", [
    ({"set": "extended"}, "entry 0: column set: unknown value"),
    ({"lang": "xx"}, "entry 0: column lang: unknown language"),
    ({"delta_sxs": float("nan")}, "entry 0: column delta_sxs: expected a finite number"),
    ({"delta_cider_xm3600": "0.1"}, "entry 0: column delta_cider_xm3600: expected a finite"),
])
def test_write_refuses_bad_rows_writing_nothing(tmp_path, change, message):
    row = {"m2": "B", "m1": "A", "lang": "de", "set": "ext", "delta_sxs": 1.0,
           "delta_cider_xm600": 0.0, "delta_cider_xm3600": 0.0, "delta_cider_coco_dev": 0.0}
    with pytest.raises(side_by_side.SideBySideError, match=message):
        side_by_side.write(tmp_path / "s.csv", [dict(row, **change)])
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("data, message", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", r"sxs.csv:1: not UTF-8 text"),
    (HEADER.encode() + b"A,B,en,core,\x00,1,2,3\n", r"sxs.csv:2: a NUL character"),
])
def test_a_binary_file_is_named_not_a_traceback(tmp_path, data, message):
    path = tmp_path / "sxs.csv"
    path.write_bytes(data)
    with pytest.raises(side_by_side.SideBySideError, match=message):
        side_by_side.read(path)


def test_a_byte_order_mark_is_no_part_of_the_first_column_a_missing_file_named(tmp_path):
    path = tmp_path / "sxs.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + ROWS[0] + "\n").encode())
    (evaluation,), _ = side_by_side.read(path)
    assert (evaluation.m2, evaluation.m1, evaluation.delta_sxs) == ("A", "B", -10.0)
    with pytest.raises(side_by_side.SideBySideError, match="side-by-side file not found"):
        side_by_side.read(tmp_path / "none.csv")


def test_write_refuses_a_pair_twice_in_one_language(tmp_path):
    row = dict(m2="A", m1="B", lang="en", set="core", delta_sxs=1.0, delta_cider_xm600=None,
               delta_cider_xm3600=0.1, delta_cider_coco_dev=None)
    with pytest.raises(side_by_side.SideBySideError, match=r"entry 1: B vs A in 'en' again "
                                                            r"\(first at entry 0\)"):
        side_by_side.write(tmp_path / "s.csv", [row, dict(row, m2="B", m1="A")])
    assert not (tmp_path / "s.csv").exists()
