"""Tests of tools/analysis/pascal50s.py and `meta --pascal50s` on small files written here
with scipy.io.savemat in the two layouts of the CIDEr authors' PASCAL-50S: the dataset's
release (triplets, consensus_pascal.mat) and their code repository's data (pairwise votes in
pair_pascal.mat's `result`, references in pascal50S.mat's `refs`, pascal_cands.mat)."""

import json
import re

import numpy as np
import pytest
from scipy import io as scipy_io

from evaluation import cider
from tests.formats.small_files import write_lines
from tools.analysis import meta, pascal50s

IMAGES = ("2008_000032", "2008_000037", "2008_000041")
COLOURS = ("red", "blue", "green", "white", "black")
THINGS = ("car", "boat", "dog")
MACHINE = ("a {} {} on a road", "a {} {} near tree 3")


def _sentences(i):
    """50 sentences of image i: two (its HC pair's) and 48 about its thing in varied words."""
    thing = THINGS[i]
    return [f"a red {thing} parked by a big tree", f"one {thing}"] + [
        f"a {COLOURS[k % 5]} {thing} {'near' if k % 2 else 'by'} tree {k}" for k in range(48)]


def _pairs():
    """(image index, B, C, category, new_data row, B's triplet wins out of 48)."""
    out = []
    for i in range(len(IMAGES)):
        own, other = _sentences(i), _sentences((i + 1) % len(IMAGES))
        machine = [m.format("red", THINGS[i]) for m in MACHINE]
        out += [(i, own[0], own[1], 1, (6, 6), 30),               # HC
                (i, other[0], own[0], 2, (7, 6), 3),              # HI: C (of the image) wins
                (i, own[1], machine[0], 3, (6, 2), 24 if i == 0 else 40),  # HM (a tie on 0)
                (i, machine[0], machine[1], 4, (2, 5), 10)]       # MM
    return out


def _pairs_repeated():
    """The pairs, then the MM pair of image 0 again (the release holds two pairs twice)."""
    return _pairs() + [_pairs()[3]]


def _cell(text):
    return np.array([[text]], dtype=object)


def write_release(folder, *, break_triplet=False, category=None, with_sentences=True, repeat=False):
    """The three files in the release's layout (struct fields by position); `repeat`: a 13th
    pair repeating the 4th."""
    if with_sentences:
        images = np.zeros((1, len(IMAGES)), dtype=[("name", "O"), ("sentences", "O")])
        for i, key in enumerate(IMAGES):
            images[0, i]["name"] = f"http://vision.cs.uiuc.edu/pascal-sentences/x/{key}.jpg"
            images[0, i]["sentences"] = np.array([_sentences(i)], dtype=object)
        scipy_io.savemat(folder / "pascal50S.mat", {"train_sent_final": images})
    pairs = _pairs_repeated() if repeat else _pairs()
    new_input = np.zeros((1, len(pairs)), dtype=[("image", "O"), ("b", "O"), ("c", "O")])
    votes = np.zeros((1, 48 * len(pairs)), dtype=[("a", "O"), ("b", "O"), ("c", "O"),
                                                  ("winner", "O")])
    for p, (i, b, c, _, _, wins) in enumerate(pairs):
        new_input[0, p] = (f"{IMAGES[i]}.jpg", b, c)
        # The 48 references: the image's sentences other than its HC pair's two.
        for t, reference in enumerate(_sentences(i)[2:]):
            votes[0, 48 * p + t] = (_cell(reference), _cell(b), _cell(c), 1.0 if t < wins else -1.0)
    if break_triplet:
        votes[0, 50]["c"] = _cell("a different caption")
    categories = [pair[3] for pair in pairs]
    if category is not None:
        categories[0] = category
    scipy_io.savemat(folder / "pair_pascal.mat", {
        "new_input": new_input, "new_data": np.array([pair[4] for pair in pairs], float),
        "category": np.array([categories], float)})
    scipy_io.savemat(folder / "consensus_pascal.mat", {"triplets": votes})
    return folder


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The release files, written once for the module's tests (which only read them)."""
    return write_release(tmp_path_factory.mktemp("pascal50s"))


def test_the_files_have_the_public_readers_layout(release):
    # The access paths of the public code that reads the real files (see pascal50s.py).
    pair = scipy_io.loadmat(release / "pair_pascal.mat")["new_input"][0][1]
    image, b, c = (x[0] for x in pair)
    assert image == "2008_000032.jpg" and isinstance(b, str)
    a, b, c, winner = (x[0][0] for x in scipy_io.loadmat(
        release / "consensus_pascal.mat")["triplets"][0][0])
    assert isinstance(a[0], str) and winner == 1
    element = scipy_io.loadmat(release / "pascal50S.mat")["train_sent_final"][0, 0]
    assert element[0][0].endswith("2008_000032.jpg") and element[1][0].size == 50


def test_the_files_are_read(release):
    # Read: pairs, kinds, winners and references.
    got = pascal50s.read(str(release))
    (analysis,) = got.analyses
    assert analysis.target == pascal50s.TRIPLETS
    assert len(analysis.pairs) == 12 and len(got.triplets) == 12 * 48
    assert [p.kind for p in analysis.pairs[:4]] == ["HC", "HI", "HM", "MM"]
    # B wins with 30 of 48 triplets, loses with 3 or 10, ties at 24.
    assert [p.human for p in analysis.pairs[:4]] == [1, -1, 0, -1]
    assert analysis.pairs[6].human == 1  # HM of image 2: 40 of 48
    assert analysis.references["2008_000032"] == _sentences(0)[2:]
    assert got.sentences["2008_000037"] == _sentences(1)
    assert "144 of 144 among the image's sentences in pascal50S.mat" in got.note


def test_accuracy_per_kind_equals_a_direct_computation(release, capsys):
    status = meta.main(["--pascal50s", str(release), "--metric", "cider-d", "--draws", "1",
                        "--samples", "0", "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    rows = {r["subset"]: r for r in json.loads(captured.out)["rows"]}
    winners = [p.human for p in pascal50s.read(str(release)).analyses[0].pairs]
    agree = _agreement(_pairs(), winners, {k: _sentences(i)[2:] for i, k in enumerate(IMAGES)})
    for kind, values in agree.items():
        assert rows[f"{kind}, all (48) refs"]["accuracy"] == pytest.approx(np.mean(values))
    everything = rows["all (48) refs"]
    assert everything["n"] == 11 and everything["human_ties"] == 1
    assert everything["accuracy"] == pytest.approx(np.mean(sum(agree.values(), [])))


def test_five_references_with_the_curve_to_48(release, tmp_path, capsys):
    out = tmp_path / "report"
    status = meta.main(["--pascal50s", str(release), "--metric", "cider", "--num-refs", "5",
                        "--draws", "2", "--samples", "0", "--curve", "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "HC, 5 refs" in captured.out and "accuracy of cider by references" in captured.out
    lines = (out / "meta_curve.csv").read_text().splitlines()
    assert len(lines) == 1 + 5 * 48  # all, HC, HI, HM, MM at 1..48 references
    assert (out / "meta_curve.png").stat().st_size > 0


def test_a_pair_given_twice_is_two_pairs_of_its_own_triplets(tmp_path):
    got = pascal50s.read(str(write_release(tmp_path, repeat=True)))
    (analysis,) = got.analyses
    assert len(analysis.pairs) == 13 and analysis.pairs[12].kind == "MM"
    assert analysis.pairs[12].human == analysis.pairs[3].human == -1  # 10 of 48 triplets each
    assert "1 pair repeats an earlier pair of its image" in got.note
    (tmp_path / "without").mkdir()  # pascal50S.mat is optional
    got = pascal50s.read(str(write_release(tmp_path / "without", with_sentences=False)))
    assert got.sentences is None and "pascal50S.mat" not in got.note


# The code repository's layout: 11 votes per pair (10 for one pair), 1 for B and -1 for C.
VOTES = (9, 2, 6, 11, 7, 5, 4, 8, 5, 1, 10, 3)  # B's votes of pair p (pair 5: 5 of 10, a tie)


def _votes(p):
    count = 10 if p == 5 else 11
    return [1] * VOTES[p] + [-1] * (count - VOTES[p])


def _votes_repeated(p):
    return [1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1] if p == 12 else _votes(p)


def write_code_layout(folder, *, bad_vote=False, other_candidate=False, with_cands=True,
                      repeat=False):
    """pascal50S.mat (refs), pascal_cands.mat (cands) and pair_pascal.mat with its votes;
    `repeat`: a 13th pair repeating the 4th with its own votes."""
    refs = np.zeros((1, len(IMAGES)), dtype=[("image", "O"), ("sent", "O")])
    for i, key in enumerate(IMAGES):
        refs[0, i] = (f"{key}.jpg", np.array([[" " + s for s in _sentences(i)]], dtype=object))
    scipy_io.savemat(folder / "pascal50S.mat", {"refs": refs})
    pairs = _pairs_repeated() if repeat else _pairs()
    votes_of = _votes_repeated if repeat else _votes
    new_input = np.zeros((1, len(pairs)), dtype=[("name", "O"), ("sent1", "O"), ("sent2", "O")])
    cands = np.zeros((1, len(pairs)), dtype=[("image", "O"), ("sent", "O")])
    result = np.zeros((1, len(pairs)), dtype=[("result", "O")])
    for p, (i, b, c, *_) in enumerate(pairs):
        new_input[0, p] = (f"{IMAGES[i]}.jpg", " " + b, " " + c)
        cands[0, p] = (f"{IMAGES[i]}.jpg", np.array([[b, "x" if other_candidate and p == 3
                                                     else c]], dtype=object))
        votes = np.array([votes_of(p)], dtype=np.int16)
        if bad_vote and p == 2:
            votes[0, 0] = 2
        result[0, p]["result"] = votes
    scipy_io.savemat(folder / "pair_pascal.mat", {
        "new_input": new_input, "new_data": np.array([pair[4] for pair in pairs], np.uint8),
        "category": np.array([[pair[3] for pair in pairs]], np.uint8), "result": result})
    if with_cands:
        scipy_io.savemat(folder / "pascal_cands.mat", {"cands": cands})
    return folder


def _agreement(pairs, winners, references):
    """Per kind: for each pair not tied, whether CIDEr-D with all references prefers the winner,
    counted here with the CIDEr engine on its own."""
    scorer = cider.CiderScorer([references[k] for k in IMAGES], "en", "cider-d")
    agree = {}
    for (i, b, c, kind, *_), winner in zip(pairs, winners, strict=True):
        if winner:
            diff = (scorer.score([b], indices=[i]).per_image[0]
                    - scorer.score([c], indices=[i]).per_image[0])
            assert diff != 0
            agree.setdefault(pascal50s.KINDS[kind], []).append(np.sign(diff) == winner)
    return agree


@pytest.fixture(scope="module")
def code_layout(tmp_path_factory):
    """The files of the code layout, written once for the module's tests (which only read
    them)."""
    return write_code_layout(tmp_path_factory.mktemp("code_layout"))


def _code_layout_winners():
    return [int(np.sign(2 * VOTES[p] - len(_votes(p)))) for p in range(12)]


def test_the_code_layout_has_the_repository_files_shapes(code_layout):
    folder = code_layout
    mat = scipy_io.loadmat(folder / "pair_pascal.mat")
    assert mat["new_input"].dtype.names == ("name", "sent1", "sent2")
    assert mat["result"][0, 0]["result"].shape == (1, 11)
    assert mat["result"][0, 5]["result"].shape == (1, 10)
    refs = scipy_io.loadmat(folder / "pascal50S.mat")["refs"]
    assert refs.dtype.names == ("image", "sent") and refs[0, 0]["sent"].shape == (1, 50)
    cands = scipy_io.loadmat(folder / "pascal_cands.mat")["cands"]
    assert cands[0, 0]["sent"].shape == (1, 2)


def test_the_code_layout_is_read(code_layout):
    got = pascal50s.read(str(code_layout))
    (analysis,) = got.analyses
    winners = _code_layout_winners()
    assert [p.human for p in analysis.pairs] == winners and winners[5] == 0
    assert analysis.references["2008_000037"] == _sentences(1)  # all 50, stripped
    assert "pascal_cands.mat matches them" in got.note and "11 pairs of 11" in got.note


def test_the_code_layouts_accuracies_are_the_repositorys(code_layout, capsys):
    winners = _code_layout_winners()
    status = meta.main(["--pascal50s", str(code_layout), "--metric", "cider-d", "--draws", "1",
                        "--samples", "0", "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    rows = {r["subset"]: r for r in json.loads(captured.out)["rows"]}
    expected = {kind: float(np.mean(v)) for kind, v in _agreement(
        _pairs(), winners, {k: _sentences(i) for i, k in enumerate(IMAGES)}).items()}
    # The figures the tool must reproduce: 2 of 3 HC pairs, 2 of 2 HI (the tie of the sixth
    # pair left out), 2 of 3 HM, 1 of 3 MM.
    assert expected == {"HC": 2 / 3, "HI": 1.0, "HM": 2 / 3, "MM": 1 / 3}
    for kind, value in expected.items():
        row = rows[f"{kind}, all (50) refs"]
        assert row["target"] == pascal50s.VOTES and row["accuracy"] == pytest.approx(value)
    assert rows["all (50) refs"]["n"] == 11 and rows["all (50) refs"]["human_ties"] == 1


def test_the_release_with_a_repeated_pair_as_a_pairwise_file_gives_the_same_accuracies(
        tmp_path, capsys):
    (tmp_path / "data").mkdir()
    write_code_layout(tmp_path / "data", repeat=True)
    prefs, refs = tmp_path / "prefs.jsonl", tmp_path / "refs.jsonl"
    lines = [{"image/key": IMAGES[i], "a": b, "b": c, "kind": pascal50s.KINDS[kind],
              "preference": {1: "a", -1: "b", 0: "tie"}[int(np.sign(sum(_votes_repeated(p))))]}
             for p, (i, b, c, kind, *_) in enumerate(_pairs_repeated())]
    write_lines(prefs, lines)
    write_lines(refs, [{"seg_id": k, "set_id": 0, "refs": _sentences(i)}
                       for i, k in enumerate(IMAGES)])
    options = ["--metric", "cider-d", "--num-refs", "5", "--draws", "3", "--samples", "0", "--json"]
    got = {}
    # The folder above data/ is read as data/.
    for name, source in (("pascal50s", ["--pascal50s", str(tmp_path)]),
                         ("pairwise", ["--pairwise", str(prefs), "--references", str(refs)])):
        assert meta.main(source + options) == 0
        out = json.loads(capsys.readouterr().out)
        assert "1 pair repeats an earlier pair of its image, each kept as a separate judgement" \
            in out["source"], out["source"]
        got[name] = {r["subset"]: (r["pairs"], r["n"], r["accuracy"]) for r in out["rows"]}
    assert got["pascal50s"] == got["pairwise"]
    assert got["pairwise"]["MM, 5 refs"][0] == 4 and got["pairwise"]["5 refs"][0] == 13


def test_both_layouts_in_one_folder_give_both_targets(tmp_path, capsys):
    write_release(tmp_path, with_sentences=False)
    write_code_layout(tmp_path)  # its pascal50S.mat (refs) holds all 50 sentences
    got = pascal50s.read(str(tmp_path))
    assert [a.target for a in got.analyses] == [pascal50s.VOTES, pascal50s.TRIPLETS]
    assert "144 of 144 among the image's sentences" in got.note
    assert meta.main(["--pascal50s", str(tmp_path), "--metric", "cider-d", "--draws", "1",
                      "--samples", "0", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {(r["target"], r["subset"].split(",")[0]) for r in rows} >= {
        (pascal50s.VOTES, "HC"), (pascal50s.TRIPLETS, "MM")}


@pytest.mark.parametrize("make, message", [
    (lambda t: write_release(t, break_triplet=True),
     r"consensus_pascal.mat: triplet 51 \(pair 2\): its candidates .* are not the pair's"),
    (lambda t: write_release(t, category=5),
     r"pair_pascal.mat: pair 1: category 5 is not 1-4 \(HC, HI, HM, MM\)"),
    (lambda t: t, r"PASCAL-50S: no pair_pascal.mat in .*; give the folder of the dataset's "
                  r"release \(pair_pascal.mat, consensus_pascal.mat\) or of the CIDEr code"),
    (lambda t: write_code_layout(t, bad_vote=True),
     r"pair_pascal.mat: result of pair 3: votes \[2, .*\] are not each 1 \(B\) or -1 \(C\)"),
    (lambda t: write_code_layout(t, other_candidate=True),
     r"pascal_cands.mat: cands\(4\): not the image and candidates of pair 4"),
    (lambda t: (write_code_layout(t), (t / "pascal50S.mat").unlink()),
     r"pascal50S.mat not found: the pairwise votes of pair_pascal.mat are scored against"),
])
def test_files_that_do_not_match_are_one_error_line(tmp_path, capsys, make, message):
    make(tmp_path)
    assert meta.main(["--pascal50s", str(tmp_path), "--metric", "cider-d"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err


def test_a_folder_above_the_code_layouts_data_names_both_places_it_looked(tmp_path, capsys):
    (tmp_path / "cider" / "data").mkdir(parents=True)
    (tmp_path / "cider" / "data" / "pascal50S.mat").write_bytes(b"")  # pair_pascal.mat absent
    assert meta.main(["--pascal50s", str(tmp_path / "cider"), "--metric", "cider-d"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"error: PASCAL-50S: no pair_pascal.mat in {tmp_path / 'cider'} nor in "
        f"{tmp_path / 'cider' / 'data'}; give the folder of"), err
