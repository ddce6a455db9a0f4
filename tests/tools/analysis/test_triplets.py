"""Tests of the CIDEr paper's triplet protocol: tools/analysis/triplets.py and
`meta --triplets` (judgement files: tests/tools/formats/test_triplet_judgements.py)."""

import json

import numpy as np
import pytest

from evaluation import cider
from tools.analysis import meta, triplets
from tools.formats import triplet_judgements

REFS = {"1": ["a dog runs on the grass", "a brown dog in a field", "dog on grass"],
        "2": ["two people ride bikes on a road", "cyclists on a country road", "people cycling"]}
# (image, kind, candidate a, candidate b, {reference: judgements choosing a, b}).
PAIRS = [
    ("1", "HM", "a brown dog running on grass", "a cat on a sofa",
     # Triplet winners a, a, b: the pair goes to a (2 triplets to 1).
     {REFS["1"][0]: (3, 0), REFS["1"][1]: (2, 1), REFS["1"][2]: (1, 2)}),
    ("2", "MM", "two cyclists on a road", "a man riding a horse",
     # Winners b, b, a: people chose b, against what CIDEr-D will say.
     {REFS["2"][0]: (1, 2), REFS["2"][1]: (0, 3), REFS["2"][2]: (2, 1)}),
    ("1", "HC", "dog on the grass", "a dog in a field",
     # Winners a, b and none (2 judgements, split): a human tie.
     {REFS["1"][0]: (2, 1), REFS["1"][1]: (1, 2), REFS["1"][2]: (1, 1)}),
]


def _judgements():
    rows = []
    for image, kind, a, b, votes in PAIRS:
        for reference, (for_a, for_b) in votes.items():
            for k in range(for_a + for_b):
                # The candidates' order changes from line to line; the choice names the text.
                first, second = (a, b) if k % 2 == 0 else (b, a)
                chosen = a if k < for_a else b
                rows.append({"image/key": image, "reference": reference, "b": first,
                             "c": second, "choice": "b" if chosen == first else "c",
                             "kind": kind})
    return rows


@pytest.fixture
def judgements_file(tmp_path):
    return str(triplet_judgements.write(tmp_path / "triplets.jsonl", _judgements()))


def test_majority_per_triplet_then_per_pair(judgements_file):
    pairs, references, summary = triplets.aggregate(triplet_judgements.read(judgements_file), "en")
    assert [(p.image, p.kind, p.a, p.human) for p in pairs] == [
        ("1", "HM", PAIRS[0][2], 1), ("2", "MM", PAIRS[1][2], -1), ("1", "HC", PAIRS[2][2], 0)]
    assert references == REFS
    assert (summary.judgements, summary.triplets, summary.split_triplets, summary.pairs,
            summary.human_ties) == (26, 9, 1, 3, 1)
    assert summary.per_triplet == {3: 8, 2: 1}
    assert "26 judgements in 9 triplets (1 with 2, 8 with 3 judgements" in summary.describe()


def _run(argv, capsys):
    status = meta.main([*argv, "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out)


def test_accuracy_per_kind_with_human_ties_dropped_or_random(judgements_file, capsys):
    scorer = cider.CiderScorer([REFS["1"], REFS["2"]], "en", "cider-d")
    a = scorer.score([PAIRS[0][2], PAIRS[1][2]]).per_image
    b = scorer.score([PAIRS[0][3], PAIRS[1][3]]).per_image
    assert np.sign(a - b).tolist() == [1, 1]  # CIDEr-D agrees on pair 1, not on pair 2
    out = _run(["--triplets", judgements_file, "--metric", "cider-d", "--draws", "2",
                "--samples", "0"], capsys)
    rows = {r["subset"]: r for r in out["rows"]}
    assert rows["all (3) refs"]["accuracy"] == 0.5 and rows["all (3) refs"]["n"] == 2
    assert rows["all (3) refs"]["human_ties"] == 1 and rows["all (3) refs"]["pairs"] == 3
    assert rows["HM, all (3) refs"]["accuracy"] == 1.0
    assert rows["MM, all (3) refs"]["accuracy"] == 0.0
    assert rows["HC, all (3) refs"]["accuracy"] is None  # its one pair is a human tie
    assert "1 of 3 pairs are human ties, left out" in out["source"]
    coin = _run(["--triplets", judgements_file, "--metric", "cider-d", "--draws", "4",
                 "--samples", "0", "--human-ties", "random"], capsys)
    tied = {r["subset"]: r for r in coin["rows"]}["HC, all (3) refs"]
    assert tied["n"] == 1 and tied["accuracy"] in (0, 0.25, 0.5, 0.75, 1)


def test_split_references(judgements_file, capsys):
    out = _run(["--triplets", judgements_file, "--metric", "cider-d", "--draws", "3",
                "--samples", "0", "--split-references"], capsys)
    row = out["rows"][0]
    # 3 references: the winners from 1, the metric with the other 2.
    assert row["subset"] == ("winners from half the references, metric with all (2) refs of "
                             "the other half")
    assert row["draws"] == 3 and 0 <= row["accuracy"] <= 1


def test_the_curve_by_references(judgements_file, tmp_path, capsys):
    report = tmp_path / "report"
    out = _run(["--triplets", judgements_file, "--metric", "cider-d", "--draws", "2",
                "--samples", "0", "--curve", "--out", str(report)], capsys)
    curve = out["curves"]["cider-d"]
    assert set(curve) == {"all", "HC", "HM", "MM"} and len(curve["all"]) == 3
    # With all 3 references the curve is the accuracy of the table.
    assert curve["all"][-1] == pytest.approx(0.5)
    assert {"meta_curve.csv", "meta_curve.png"} <= {p.name for p in report.iterdir()}
    assert (report / "meta_curve.csv").read_text().splitlines()[0] == "metric,kind,refs,accuracy"


@pytest.mark.parametrize("extra, message", [
    (["--num-refs", "0"], r"--num-refs must be at least 1, got 0 \(leave it out to use all"),
    (["--num-refs", "99"], r"--num-refs 99: the images have at most 3 references"),
    (["--split-references", "--references", "x"], r"--split-references splits the triplets"),
    ([], r"pairs need --metric"),
])
def test_bad_pair_options_are_one_error_line(judgements_file, capsys, extra, message):
    metric = [] if not extra else ["--metric", "cider-d"]
    status = meta.main(["--triplets", judgements_file, *metric, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert __import__("re").search(message, err[0]), err[0]
