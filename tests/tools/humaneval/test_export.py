"""Tests of the exports (tools/humaneval/export.py): ratings, side_by_side.csv, THUMB layout."""

import csv
import json
import os

import pytest

from tests.formats.small_files import read_csv
from tests.tools.humaneval import helpers
from tools.formats import side_by_side, thumb_ratings
from tools.humaneval import export, rating_stats, simulate, store

PAPER_COLUMNS = ("m2", "m1", "lang", "set", "delta_sxs", "delta_cider_xm600",
                 "delta_cider_xm3600", "delta_cider_coco_dev")  # the paper's side_by_side.csv


def test_sxs_export(make_session, tmp_path):
    session = make_session(langs=("en", "ar"))
    simulate.simulate(session, noise=0.5, seed=1)
    paths = export.export(session, str(tmp_path / "out"))
    ratings = rating_stats.load_ratings(session)
    rows = read_csv(paths["csv"])
    assert len(rows) == len(ratings) == sum(map(len, session.assignments.values()))
    first = rows[0]
    item = session.items[first["item"]]
    # Un-blinded: the export names which model was on which side.
    assert {first["left"].split("@")[0], first["right"].split("@")[0]} <= {"base", "test"}
    assert int(first["position"]) == session.assignments[first["rater"]].index(item.id) + 1
    lines = [json.loads(line) for line in open(paths["jsonl"], encoding="utf-8")]
    assert [line["item"] for line in lines] == [r["item"] for r in rows]
    assert lines[0]["texts"] == list(item.texts)

    with open(paths["side_by_side"], newline="", encoding="utf-8") as f:
        assert tuple(next(csv.reader(f))) == PAPER_COLUMNS
    side = read_csv(paths["side_by_side"])
    deltas = rating_stats.delta_sxs(session, ratings, resamples=0)
    m1, m2 = session.systems["m1"], session.systems["m2"]
    for row in side:
        lang = row["lang"]
        assert (row["m2"], row["m1"], row["set"]) == (
            "test", "base", "core" if lang == "en" else "ext")
        assert float(row["delta_sxs"]) == pytest.approx(deltas[lang]["delta"], abs=0.005)
        for column, field in (("delta_cider_xm600", "cider_subset"),
                              ("delta_cider_xm3600", "cider_xm3600"),
                              ("delta_cider_coco_dev", "cider_coco_dev")):
            assert float(row[column]) == pytest.approx(m2[field][lang] - m1[field][lang], abs=5e-5)
    # The correlation tool reads it as it reads the paper's file.
    evaluations, columns = side_by_side.read(paths["side_by_side"])
    assert [e.lang for e in evaluations] == ["en", "ar"]
    assert columns == PAPER_COLUMNS[5:]


def test_missing_cider_is_an_empty_cell(make_session, release, tmp_path):
    folders = [str(tmp_path / "a"), str(tmp_path / "b")]
    for seed, folder in enumerate(folders):
        helpers.write_results(folder, release, ("en",), good=0.5, seed=seed, coco_dev=False)
    session = make_session(langs=("en",), systems=(("a", folders[0]), ("b", folders[1])))
    simulate.simulate(session, seed=0)
    row = export.side_by_side_rows(session, rating_stats.load_ratings(session))[0]
    assert row["delta_cider_coco_dev"] is None and row["delta_cider_xm3600"] is not None
    (cells,) = read_csv(export.export(session, str(tmp_path / "out"))["side_by_side"])
    assert cells["delta_cider_coco_dev"] == "" and cells["delta_cider_xm3600"] != ""


def test_thumb_release_layout(make_session, results_pair, tmp_path):
    session = make_session(type="thumb", systems=(("test", results_pair[1]),),
                           references=True, langs=("en",), replication=2, gold_share=0.2)
    simulate.simulate(session, noise=0.8, seed=3)
    paths = export.export(session, str(tmp_path / "thumb"))
    assert set(paths) >= {"thumb_1", "thumb_2"}
    tests = [i for i in session.items.values() if not i.is_gold]
    for name in ("thumb_1", "thumb_2"):
        lines = [json.loads(line) for line in open(paths[name], encoding="utf-8")]
        assert len(lines) == len(tests)  # each file: every caption once
        assert len({(x["SYS"], x["seg_id"]) for x in lines}) == len(lines)
        for line in lines:
            assert tuple(line) == thumb_ratings.RELEASE_FIELDS
            assert line["human_score"] == pytest.approx(
                (line["P"] + line["R"]) / 2 + line["Fl"] + line["Con"] + line["Inc"])
            assert line["image"] == f"{line['seg_id']}.jpg"
            assert isinstance(line["set_id"], int) and isinstance(line["seg_id"], str)
        assert {x["SYS"] for x in lines} == {"test", "references#1", "references#2"}
    assert os.path.exists(paths["csv"])


def test_exported_times_are_the_active_ones_beside_the_wall_clock(make_session, tmp_path):
    session = make_session(langs=("en",))
    store.init(session.db_path, session.digest)
    item = session.assignments["en-1"][0]
    with store.Store(session.db_path) as db:
        db.mark_shown("en-1", item, now=100.0)
        db.add_rating("en-1", item, 1, {"choice": 1}, now=460.0, active_seconds=5.5)
        db.mark_shown("en-2", item, now=100.0)
        db.add_rating("en-2", item, 1, {"choice": 1}, now=130.0)  # no page script
    rows = read_csv(export.export(session, str(tmp_path / "out"))["csv"])
    assert [(r["rater"], r["seconds"], r["wall_seconds"]) for r in rows] == [
        ("en-1", "5.5", "360.0"), ("en-2", "30.0", "30.0")]
