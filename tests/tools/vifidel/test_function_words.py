"""The function-word lists of VIFIDEL: their derivation from UD treebanks, and what they keep.

The paper removes stop words so that "only content words are retained" (Sec. 3.1): with the
default lists, numerals, nouns and adjectives stay in a caption, so a caption naming the
image's objects scores as the objects do.
"""

import os

import numpy as np
import pytest

from errors import InputError
from tests.tools.vifidel.conftest import write_vec
from tools.vifidel import corpus, derive_function_words, stopwords, vectors
from tools.vifidel.scorer import VifidelScorer

# Two sentences in CoNLL-U: "du" is a multiword token (de + le), "two" a numeral, "like" a
# verb once and an adposition twice, "on" an adposition once only.
CONLLU = """# text = The man sat on two chairs du côté.
1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tman\tman\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\t_\t_\t0\troot\t_\t_
4\ton\ton\tADP\t_\t_\t6\tcase\t_\t_
5\ttwo\ttwo\tNUM\t_\t_\t6\tnummod\t_\t_
6\tchairs\tchair\tNOUN\t_\t_\t3\tobl\t_\t_
7-8\tdu\t_\t_\t_\t_\t_\t_\t_\t_
7\tde\tde\tADP\t_\t_\t9\tcase\t_\t_
8\tle\tle\tDET\t_\t_\t9\tdet\t_\t_
9\tcôté\tcôté\tNOUN\t_\t_\t3\tobl\t_\t_
9.1\tgone\tgo\tVERB\t_\t_\t_\t_\t_\t_

# text = the like du 2 like like
1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tlike\tlike\tVERB\t_\t_\t0\troot\t_\t_
3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_
3\tde\tde\tADP\t_\t_\t2\tcase\t_\t_
4\tle\tle\tDET\t_\t_\t2\tdet\t_\t_
5\t2\t2\tNUM\t_\t_\t2\tobj\t_\t_
6\tlike\tlike\tADP\t_\t_\t2\tcase\t_\t_
7\tlike\tlike\tADP\t_\t_\t2\tcase\t_\t_
"""


def test_derivation_rule(tmp_path):
    path = tmp_path / "xx.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    words, counts = derive_function_words.function_words([str(path)])
    # the (twice DET), du (twice, both parts closed-class), de, le, like (ADP 2 of 3 times);
    # "on" once only, "two" a numeral, "man" a noun.
    assert words == ["de", "du", "le", "like", "the"]
    assert counts["like"] == (2, 3) and counts["du"] == (2, 2)
    out = tmp_path / "lists"
    assert derive_function_words.main(["--treebank", f"en={path}", "--source", "en=UD test",
                                       "--out", str(out)]) == 0
    text = (out / "en.txt").read_text(encoding="utf-8")
    assert "xx.conllu (UD test)" in text and text.endswith("like\nthe\n")
    assert stopwords.read_file(str(out / "en.txt"), "en") == {"de", "du", "le", "like", "the"}
    (tmp_path / "bad.conllu").write_text("1\tthe\tDET\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.conllu:1: expected 10 tab-separated columns"):
        derive_function_words.function_words([str(tmp_path / "bad.conllu")])


def test_the_english_list_keeps_content_words_the_iso_list_removes():
    function, iso = stopwords.load("function", "en").keys, stopwords.load("iso", "en").keys
    content = {"man", "men", "big", "small", "large", "top", "side", "front", "group", "two"}
    assert content <= iso  # the defect of the former default
    assert not content & function
    assert {"a", "an", "the", "on", "in", "of", "with", "is", "are", "and", "it"} <= function


def test_every_list_names_its_treebank_and_three_languages_have_none():
    assert stopwords.missing(stopwords_langs()) == ["mi", "quz", "sw"]
    for name in os.listdir(stopwords.FUNCTION_LISTS):
        with open(os.path.join(stopwords.FUNCTION_LISTS, name), encoding="utf-8") as f:
            head = f.read(600)
        assert "UniversalDependencies/UD_" in head and "rule:" in head, name
    sw = stopwords.load("function", "sw")
    assert sw.missing and not sw.keys and "every word kept" in sw.origin
    assert "会" in stopwords.load("function", "zh").keys  # keys as bags.match joins them
    assert "の" in stopwords.load("function", "ja").keys


def stopwords_langs():
    from data import languages
    return languages.XM3600_LANGS


@pytest.fixture
def man_chair(tmp_path):
    """English vectors of a few words (random, fixed) and one image labelled man and chair."""
    rng = np.random.default_rng(3)
    words = ["man", "woman", "chair", "a", "on", "the", "sits"]
    path = write_vec(tmp_path / "wiki.en.vec", words, rng.normal(size=(len(words), 8)))
    (tmp_path / "labels.jsonl").write_text(
        '{"image/key": "img1", "labels": ["Man", "Chair"]}\n', encoding="utf-8")
    return tmp_path, vectors.load_vectors(path, "en")


def test_default_settings_keep_the_content_words(man_chair):
    folder, v = man_chair
    settings = corpus.Settings(vectors=(f"{folder}/wiki.{{lang}}.vec",),
                               labels=(f"{folder}/labels.jsonl",), use_references=False)
    scorer = corpus.build_scorers({"en": ["img1"]}, {"en": [[]]}, settings)["en"]
    # The constructor's default is the settings' default.
    assert VifidelScorer([{"Man": 1, "Chair": 1}], "en", v).stopwords == scorer.stopwords
    assert scorer.stopwords == stopwords.load(stopwords.DEFAULT, "en").keys

    def score(caption):
        return float(scorer.score([caption]).per_image[0])
    assert score("a man on a chair") > score("a woman on a chair")
    # Content words exactly the labels: the caption scores as the labels themselves.
    assert score("a man on a chair") == pytest.approx(score("man chair"), abs=1e-12)
    assert score("man chair") == pytest.approx(1.0, abs=1e-6)
    # The stopwordsiso list drops "man": the caption is "chair" alone to it.
    iso = corpus.build_scorers({"en": ["img1"]}, {"en": [[]]},
                               corpus.Settings(**{**settings.__dict__, "stopwords": "iso"}))
    iso_score = lambda c: float(iso["en"].score([c]).per_image[0])  # noqa: E731
    assert iso_score("a man on a chair") == pytest.approx(iso_score("chair"), abs=1e-12)
    assert iso_score("a man on a chair") < 1 - 1e-3
