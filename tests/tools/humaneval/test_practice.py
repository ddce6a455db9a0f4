"""Guideline examples and practice items (tools/humaneval/practice.py)."""

import numpy as np
import pytest

from tests.tools.humaneval import helpers
from tools.humaneval import practice, results, texts


def _built(release, session_type):
    """(records, subset, examples, practice items, references) of the release."""
    records = results.read_release(release)
    subset = [r.key for r in records][:6]
    examples, items = practice.build(session_type, ("en", "ar"), records, subset,
                                     np.random.default_rng(0))
    return records, subset, examples, items, dict(helpers.release_records(release))


@pytest.mark.parametrize("session_type", ["sxs", "quality", "thumb"])
def test_examples_from_the_release(release, session_type):
    _, _, examples, _, refs = _built(release, session_type)
    assert [e["lang"] for e in examples] == ["en", "ar"]
    for example in examples:
        assert example["own"] == refs[example["image"]][example["lang"]][0]
        assert example["other"] == refs[example["other_image"]][example["lang"]][0]
        assert example["other"] != example["own"]


@pytest.mark.parametrize("session_type", ["sxs", "quality", "thumb"])
def test_practice_items_from_the_release(release, session_type):
    records, subset, examples, items, refs = _built(release, session_type)
    for lang in ("en", "ar"):
        mine = [i for i in items if i["lang"] == lang]
        assert len(mine) == practice.PRACTICE_ITEMS
        images = [examples[0 if lang == "en" else 1]["image"], *(i["image"] for i in mine)]
        assert len(set(images)) == len(images)  # every one a different image
        # The two images outside the subset come first.
        assert set(images[:2]) == {r.key for r in records} - set(subset)
        for item in mine:
            for text, source in zip(item["texts"], item["sources"], strict=True):
                assert text == refs[source["image"]][lang][0]  # the release's own captions
            own = [s["image"] == item["image"] for s in item["sources"]]
            if session_type == "sxs" and own != [True, True]:
                assert item["accept"] == {"choice": [-3, -2, -1] if own[0] else [1, 2, 3]}
            if session_type == "quality":
                assert item["accept"] == {"quality": ["Excellent", "Good"] if own[0] else ["Bad"]}
            if session_type == "thumb":
                assert item["accept"] == {"P": [4, 5] if own[0] else [1, 2]}


def test_accepted_answers_are_correct():
    item = {"accept": {"choice": [1, 2, 3]}}
    assert practice.is_correct(item, {"choice": 2})
    assert not practice.is_correct(item, {"choice": 0})
    thumb = {"accept": {"P": [1, 2]}}
    assert practice.is_correct(thumb, {"P": 2, "R": 5, "Fl": 0.0, "Con": 0.0, "Inc": 0.0})


def test_answers_are_described_in_words():
    item = {"accept": {"choice": [1, 2, 3]}}
    ui = texts.Wording()
    assert practice.describe_accepted("sxs", item, ui) == (
        "Right slightly better / Right better / Right much better")
    thumb = {"accept": {"P": [1, 2]}}
    assert practice.describe_accepted("thumb", thumb, ui) == "Precision 1 / 2"
    assert practice.describe("thumb", {"P": 4, "R": 3, "Fl": -0.1, "Con": 0.0, "Inc": 0.0},
                             ui) == ("Precision 4, Recall 3, Fluency -0.1, Conciseness 0, "
                                     "Inclusive language 0")
