"""VIFIDEL end to end against an independent implementation of the paper's Eqs. 1-5 (a plain
linear program by scipy's HiGHS for the transport problem; the repository uses POT)."""

import math
import os

import numpy as np
import pytest
import stopwordsiso

from tests.tools.vifidel.conftest import emd_lp, write_vec
from tools.vifidel import corpus
from tools.vifidel import stopwords as stopwords_lib

WORDS = ("dog", "frisbee", "grass", "park", "man", "ball", "cat", "sofa", "running", "red")
LABELS = {"aaaa": {"Dog": 2, "Frisbee": 1}, "bbbb": {"Cat": 1, "Sofa": 3},
          "cccc": {"Man": 1, "Ball": 2, "Dog": 1}}
CAPTIONS = {"aaaa": "a dog is running on the grass with a red frisbee",
            "bbbb": "the cat sleeps on a sofa",
            "cccc": "there is a man and his dog in the park"}
REFERENCES = {"aaaa": ["a dog catches a frisbee", "the dog runs in a park on grass"],
              "bbbb": ["a cat on the red sofa", "cat", "two cats"],
              "cccc": ["a man throws a ball to his dog"]}


@pytest.fixture(scope="module")
def vectors():
    rng = np.random.default_rng(7)
    return {w: rng.normal(size=5) for w in WORDS}


@pytest.fixture
def files(tmp_path, vectors):
    names = sorted({name for labels in LABELS.values() for name in labels})
    (tmp_path / "descriptions.csv").write_text(
        "LabelName,DisplayName\n" + "".join(f"/m/{i},{n}\n" for i, n in enumerate(names)))
    rows = [f"{key},xclick,/m/{names.index(name)},1,0.1,0.2,0.1,0.2"
            for key, labels in LABELS.items() for name, boxes in labels.items()
            for _ in range(boxes)]
    (tmp_path / "test-annotations-bbox.csv").write_text(
        "ImageID,Source,LabelName,Confidence,XMin,XMax,YMin,YMax\n" + "\n".join(rows) + "\n")
    write_vec(tmp_path / "wiki.en.vec", list(vectors), list(vectors.values()))
    return tmp_path


def _unit(v):
    return v / np.linalg.norm(v)


def _content(sentence, vectors, stop):
    return [w for w in sentence.lower().split() if w in vectors and w not in stop]


def paper_vifidel(labels, caption, references, vectors, p, stop, binary=False):
    """VIFIDEL(I, S) from Eqs. 1-5, with words as given (no normalizer, no POT)."""
    label_words = [name.lower() for name in labels]
    a = np.array([1.0 if binary else labels[name] for name in labels])
    counts = {}
    for w in _content(caption, vectors, stop):
        counts[w] = counts.get(w, 0) + 1
    words, b = list(counts), np.array(list(counts.values()), float)
    x = {w: _unit(vectors[w]) for w in vectors}

    def rho(k):  # Eq. 4
        if references is None:
            return 1.0
        per_ref = [(1 - max(x[k] @ x[t] for t in _content(r, vectors, stop))) / 2
                   for r in references if _content(r, vectors, stop)]
        return float(np.mean(per_ref))

    cost = np.array([[np.linalg.norm(rho(i) * x[i] - rho(j) * x[j]) ** p  # Eqs. 1, 5
                      for j in words] for i in label_words])
    return math.exp(-emd_lp(a, b, cost))  # Eq. 3


def _settings(folder, **kwargs):
    return corpus.Settings(vectors=(f"{folder}/wiki.{{lang}}.vec",),
                           labels=(f"{folder}/test-annotations-bbox.csv",),
                           class_descriptions=f"{folder}/descriptions.csv", **kwargs)


def _stop_list(source):
    """The words of a stop list, read here from its own source (not through the module)."""
    if source == "iso":
        return set(stopwordsiso.stopwords("en"))
    if source == "function":
        with open(os.path.join(stopwords_lib.FUNCTION_LISTS, "en.txt"), encoding="utf-8") as f:
            return {line.strip() for line in f if line.strip() and not line.startswith("#")}
    return set()


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("use_references", [True, False], ids=["references", "plain"])
@pytest.mark.parametrize("stopwords", ["function", "iso", "none"])
def test_scores_equal_eqs_1_to_5(files, vectors, p, use_references, stopwords):
    keys = list(LABELS)
    scorer = corpus.build_scorers(
        {"en": keys}, {"en": [REFERENCES[k] for k in keys]},
        _settings(files, cost_power=p, use_references=use_references,
                  stopwords=stopwords))["en"]
    got = scorer.score([CAPTIONS[k] for k in keys]).per_image
    stop = _stop_list(stopwords)
    expected = [paper_vifidel(LABELS[k], CAPTIONS[k], REFERENCES[k] if use_references else None,
                              vectors, p, stop) for k in keys]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_binary_label_weights_are_the_ablation(files, vectors):
    keys = list(LABELS)
    scorer = corpus.build_scorers({"en": keys}, {"en": [REFERENCES[k] for k in keys]},
                                  _settings(files, label_weights="binary"))["en"]
    got = scorer.score([CAPTIONS[k] for k in keys]).per_image
    stop = _stop_list("function")  # the default
    expected = [paper_vifidel(LABELS[k], CAPTIONS[k], REFERENCES[k], vectors, 2, stop,
                              binary=True) for k in keys]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    weighted = corpus.build_scorers({"en": keys}, {"en": [REFERENCES[k] for k in keys]},
                                    _settings(files))["en"].score(
        [CAPTIONS[k] for k in keys]).per_image
    assert not np.allclose(got, weighted)  # the box counts matter
