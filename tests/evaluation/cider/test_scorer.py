"""Agreement of evaluation.cider with pycocoevalcap and the paper's CIDEr, and its properties."""

import functools
import math
import threading
import warnings
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycocoevalcap.cider.cider import Cider

import errors
from evaluation import cider
from evaluation.cider import kernel as cider_kernel
from evaluation.cider import ngram_index

# Words that normalization leaves as they are (lowercase ASCII letters).
WORDS = [a + b for a in "abcdefgh" for b in "xyz"]


def random_corpus(rng, num_images, vocab, max_words=30, max_refs=5):
    """Space-joined captions with lengths 0..max_words, repeats and long predictions."""
    words = WORDS[:vocab]

    def caption(low=0, high=max_words):
        length = int(rng.integers(low, high + 1))
        if rng.random() < 0.2:
            length = int(rng.integers(0, 3))  # 0, 1 and 2 words often
        return " ".join(rng.choice(words, length))

    refs = [[caption() for _ in range(rng.integers(1, max_refs + 1))] for _ in range(num_images)]
    if not any(s for rs in refs for s in rs):
        refs[0][0] = words[0]  # pycocoevalcap fails on a corpus without any n-gram
    preds = []
    for rs in refs:
        kind = rng.random()
        if kind < 0.3:
            preds.append(rs[0])                              # identical to a reference
        elif kind < 0.5:
            preds.append(" ".join([rs[-1]] * 3).strip())     # repeated n-grams, longer
        else:
            preds.append(caption())
    return refs, preds


def reference_scores(refs, preds):
    gts = {i: list(r) for i, r in enumerate(refs)}
    res = {i: [p] for i, p in enumerate(preds)}
    corpus, per_image = Cider().compute_score(gts, res)
    return corpus, np.asarray(per_image)


def _assert_agrees(refs, preds):
    expected_corpus, expected = reference_scores(refs, preds)
    result = cider.CiderScorer(refs, "en").score(preds)
    np.testing.assert_allclose(result.per_image, expected, rtol=0, atol=1e-5)
    assert abs(result.corpus - expected_corpus) < 1e-6
    assert result.per_image.dtype == np.float64


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_pycocoevalcap(seed):
    rng = np.random.default_rng(seed)
    _assert_agrees(*random_corpus(rng, int(rng.integers(2, 60)), int(rng.integers(2, 24))))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), num_images=st.integers(2, 12),
       vocab=st.integers(1, 24), max_words=st.integers(0, 30), max_refs=st.integers(1, 5))
def test_agrees_with_pycocoevalcap_hypothesis(seed, num_images, vocab, max_words, max_refs):
    _assert_agrees(*random_corpus(np.random.default_rng(seed), num_images, vocab, max_words,
                                  max_refs))


def test_a_corpus_of_unseen_words_with_empty_captions_matches_the_reference():
    refs = [["a dog runs", "a dog"], ["", "cat"], ["a cat on a mat", "the cat sits"]]
    preds = ["zebra zebra dog", "", "a cat on a mat mat mat"]
    expected_corpus, expected = reference_scores(refs, preds)
    result = cider.CiderScorer(refs, "en").score(preds)
    np.testing.assert_allclose(result.per_image, expected, atol=1e-12)
    assert result.per_image[1] == 0.0
    assert not np.isnan(result.per_image).any()


def test_identical_prediction_gets_the_maximum():
    rng = np.random.default_rng(7)
    refs, _ = random_corpus(rng, 20, 20, max_refs=1)
    # One reference each, with a word of its own so that no order has idf 0 throughout.
    refs = [[f"{r[0]} q{i}"] for i, r in enumerate(refs)]
    exact = cider.CiderScorer(refs, "en").score([r[0] for r in refs])
    # With one reference, a copy has cosine 1 for every n that has n-grams.
    for r, score in zip(refs, exact.per_image, strict=True):
        orders = min(4, len(r[0].split()))
        assert score == pytest.approx(10.0 * orders / 4, abs=1e-9)
    other = cider.CiderScorer(refs, "en").score([r[0] + " xx" for r in refs])
    assert (other.per_image < exact.per_image).all()


def test_permutation_invariance():
    rng = np.random.default_rng(3)
    refs, preds = random_corpus(rng, 30, 12)
    base = cider.CiderScorer(refs, "en").score(preds)
    perm = rng.permutation(len(refs))
    permuted = cider.CiderScorer([refs[i] for i in perm], "en").score([preds[i] for i in perm])
    np.testing.assert_allclose(permuted.per_image, base.per_image[perm], atol=1e-12)
    assert permuted.corpus == pytest.approx(base.corpus, abs=1e-12)


def test_independent_of_batch_size():
    rng = np.random.default_rng(4)
    refs, preds = random_corpus(rng, 40, 15)
    scorer = cider.CiderScorer(refs, "en")
    full = scorer.score(preds).per_image
    subset = [5, 0, 17, 39]
    part = scorer.score([preds[i] for i in subset], indices=subset)
    np.testing.assert_allclose(part.per_image, full[subset], atol=1e-12)
    assert part.corpus == pytest.approx(full[subset].mean())


def test_independent_of_padding(monkeypatch):
    rng = np.random.default_rng(4)
    refs, preds = random_corpus(rng, 40, 15)
    full = cider.CiderScorer(refs, "en").score(preds).per_image
    # Larger padding (another compiled shape) changes nothing.
    monkeypatch.setattr(cider_kernel, "MIN_PAD", 1 << 15)
    padded = cider.CiderScorer(refs, "en").score(preds).per_image
    np.testing.assert_allclose(padded, full, atol=1e-12)


def test_languages_on_threads_equal_one_by_one():
    rng = np.random.default_rng(6)
    corpora = [random_corpus(rng, 20, 8 + i) for i in range(5)]

    def score(corpus):
        return cider.CiderScorer(corpus[0], "en").score(corpus[1]).per_image

    threaded = cider.map_languages(score, corpora)
    for corpus, per_image in zip(corpora, threaded, strict=True):
        np.testing.assert_array_equal(per_image, score(corpus))
    with pytest.raises(errors.InputError, match="got 0 predictions for 20 images"):
        cider.map_languages(lambda corpus: cider.CiderScorer(corpus[0], "en").score([]), corpora)


def test_map_languages_starts_the_costliest_first(monkeypatch):
    from evaluation.cider import scorer as scorer_lib
    monkeypatch.setattr(scorer_lib, "num_cores", lambda: 2)
    started, release = [], threading.Event()

    def work(item):
        started.append(item)
        release.wait(timeout=10)
        if item in (1, 3):
            raise ValueError(f"item {item}")
        return item * 10

    costs = [1.0, 5.0, 2.0, 9.0, 3.0]
    threading.Timer(0.2, release.set).start()
    with pytest.raises(ValueError, match="item 1"):  # the first failure in item order
        cider.map_languages(work, range(5), costs=costs)
    assert set(started[:2]) == {3, 1}  # the two costliest start first


def test_map_languages_keeps_item_order(monkeypatch):
    from evaluation.cider import scorer as scorer_lib
    monkeypatch.setattr(scorer_lib, "num_cores", lambda: 2)
    costs = [1.0, 5.0, 2.0, 9.0, 3.0]
    assert cider.map_languages(lambda i: i * 10, range(5), costs=costs) == [0, 10, 20, 30, 40]


def test_repeated_calls_do_not_leak_state():
    rng = np.random.default_rng(5)
    refs, preds = random_corpus(rng, 25, 10)
    _, other = random_corpus(rng, 25, 30)
    scorer = cider.CiderScorer(refs, "en")
    first = scorer.score(preds).per_image
    scorer.score(other)
    np.testing.assert_array_equal(scorer.score(preds).per_image, first)


def paper_cider(refs, preds):
    """Vedantam et al. (2015), Eqs. 1-3, directly, times 10 like the authors' code."""
    num_images = len(refs)

    def ngrams(sentence, n):
        words = sentence.split()
        return Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))

    scores = []
    for i, pred in enumerate(preds):
        per_n = []
        for n in range(1, 5):
            def g(sentence, n=n):
                h = ngrams(sentence, n)
                total = sum(h.values())
                vector = {}
                for k, count in h.items():
                    df = sum(1 for rs in refs if any(ngrams(s, n)[k] > 0 for s in rs))
                    # max(1, df): a prediction n-gram in no reference (as the authors' code).
                    vector[k] = count / total * math.log(num_images / max(1, df))
                return vector

            gc = g(pred)
            cosines = []
            for s in refs[i]:
                gs = g(s)
                dot = sum(v * gs.get(k, 0.0) for k, v in gc.items())
                norm = math.sqrt(sum(v * v for v in gc.values())) * math.sqrt(
                    sum(v * v for v in gs.values()))
                cosines.append(dot / norm if norm > 0 else 0.0)
            per_n.append(sum(cosines) / len(cosines))
        scores.append(10.0 * sum(per_n) / 4)
    return np.array(scores)


@pytest.mark.parametrize("seed", range(3))
def test_cider_matches_the_paper_equations(seed):
    rng = np.random.default_rng(100 + seed)
    refs, preds = random_corpus(rng, 12, 10, max_words=12, max_refs=3)
    expected = paper_cider(refs, preds)
    result = cider.CiderScorer(refs, "en", metric="cider").score(preds)
    np.testing.assert_allclose(result.per_image, expected, atol=1e-9)
    assert result.corpus == pytest.approx(expected.mean(), abs=1e-9)


def test_cider_d_is_at_most_cider_with_one_reference():
    # Clipping and the length penalty can only lower a cosine.
    rng = np.random.default_rng(11)
    refs, preds = random_corpus(rng, 30, 10, max_refs=1)
    d = cider.CiderScorer(refs, "en").score(preds).per_image
    c = cider.CiderScorer(refs, "en", metric="cider").score(preds).per_image
    assert (d <= c + 1e-12).all()


def test_single_image_warns():
    with pytest.warns(UserWarning, match="single image"):
        cider.CiderScorer([["a dog runs on grass"]], "en")


def test_single_image_scores_zero():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the warning: test_single_image_warns
        scorer = cider.CiderScorer([["a dog runs on grass"]], "en")
    assert scorer.score(["a dog runs on grass"]).corpus == 0.0


def _scorer_of_30_images():
    rng = np.random.default_rng(9)
    refs, preds = random_corpus(rng, 30, 12)
    return refs, preds, cider.CiderScorer(refs, "en")


def test_document_frequency_counts_are_pycocoevalcaps():
    refs, _, full = _scorer_of_30_images()
    df = full.document_frequency
    assert df.num_images == 30
    # The saved counts are pycocoevalcap's document frequencies.
    expected = Counter(k for rs in refs for k in {
        " ".join(w[i:i + n]) for s in rs for w in [s.split()] for n in range(1, 5)
        for i in range(len(w) - n + 1)})
    assert df.counts == dict(expected)


def test_document_frequency_round_trips(tmp_path):
    _, _, full = _scorer_of_30_images()
    df = full.document_frequency
    path = tmp_path / "df.json"
    df.save(path)
    assert cider.DocumentFrequency.load(path) == df


def test_a_few_images_scored_with_the_full_sets_df_match_the_full_run(tmp_path):
    refs, preds, full = _scorer_of_30_images()
    path = tmp_path / "df.json"
    full.document_frequency.save(path)
    loaded = cider.DocumentFrequency.load(path)
    # A few images scored with the full set's df match the full run.
    subset = [3, 8, 21]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        few = cider.CiderScorer([refs[i] for i in subset], "en", df=loaded)
        single = cider.CiderScorer([refs[8]], "en", df=loaded)
    full_scores = full.score(preds).per_image
    np.testing.assert_allclose(few.score([preds[i] for i in subset]).per_image,
                               full_scores[subset], atol=1e-12)
    np.testing.assert_allclose(single.score([preds[8]]).per_image, full_scores[[8]], atol=1e-12)


def test_document_frequency_from_another_corpus_matches_pycocoevalcap_formula():
    # df given for n-grams the references lack, and missing for some they have.
    df = cider.DocumentFrequency("en", 10, {"a": 9, "a b": 3, "c": 1, "q": 2, "a b c d": 1},
                                 cider.text.DEFAULT_OPTIONS.describe("char"))
    refs = [["a b c d", "a c"], ["b b a"]]
    preds = ["a b c d e", "q a b"]
    result = cider.CiderScorer(refs, "en", df=df).score(preds)

    def vec(sentence):
        words = sentence.split()
        out = [{} for _ in range(4)]
        for n in range(1, 5):
            for i in range(len(words) - n + 1):
                k = " ".join(words[i:i + n])
                out[n - 1][k] = out[n - 1].get(k, 0) + 1
        return [{k: c * (math.log(10) - math.log(max(1, df.counts.get(k, 0))))
                 for k, c in o.items()} for o in out], max(0, len(words) - 1)

    expected = []
    for rs, p in zip(refs, preds, strict=True):
        vh, lh = vec(p)
        total = 0.0
        for r in rs:
            vr, lr = vec(r)
            val = 0.0
            for n in range(4):
                dot = sum(min(v, vr[n].get(k, 0.0)) * vr[n].get(k, 0.0) for k, v in vh[n].items())
                norm = math.sqrt(sum(v * v for v in vh[n].values())) * math.sqrt(
                    sum(v * v for v in vr[n].values()))
                val += (dot / norm if norm else dot) * math.exp(-(lh - lr) ** 2 / 72)
            total += val / 4
        expected.append(10 * total / len(rs))
    np.testing.assert_allclose(result.per_image, expected, atol=1e-12)


def test_bad_arguments():
    with pytest.raises(errors.InputError, match="metric"):
        cider.CiderScorer([["a"]], "en", metric="bleu")
    with pytest.raises(errors.InputError, match="image 1"):
        cider.CiderScorer([["a"], []], "en")
    with pytest.raises(errors.InputError, match="image 0"):
        cider.CiderScorer(["a dog"], "en")
    scorer = cider.CiderScorer([["a b"], ["c d"]], "en")
    with pytest.raises(errors.InputError, match="2 images"):
        scorer.score(["a b"])
    with pytest.raises(errors.InputError, match="distinct"):
        scorer.score(["a", "b"], indices=[1, 1])
    with pytest.raises(errors.InputError, match="0..1"):
        scorer.score(["a"], indices=[2])
    df = cider.DocumentFrequency("es", 3, {"a": 1}, "x")
    with pytest.raises(errors.InputError, match="'es', not 'en'"):
        cider.CiderScorer([["a"]], "en", df=df)
    # Dicts, as a user holding {image key: ...} would pass them: a clear error, never keys
    # scored as captions nor a traceback.
    with pytest.raises(errors.InputError, match="references must be a list .* not a dict"):
        cider.CiderScorer({"k1": ["a b"], "k2": ["c d"]}, "en")
    with pytest.raises(errors.InputError, match="predictions must be a list .* not a dict"):
        scorer.score({"k1": "a b", "k2": "c d"})
    with pytest.raises(errors.InputError, match="records must be those of .*read_captions"):
        cider.score_languages([{"image/key": "k1", "en": {"caption": ["a b"]}}],
                              {"en": {"k1": "a b"}})


@settings(max_examples=40, deadline=None)
@given(vocab=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=30),
       extra=st.lists(st.text(max_size=6), max_size=10), seed=st.integers(0, 2**16))
def test_vocabulary_ids_from_spans_are_exact(vocab, extra, seed):
    # Tokens of 1-6 characters, NUL and other controls included, known and unseen.
    vocab = list(dict.fromkeys(w for v in vocab for w in v.split()))
    if not vocab:
        return
    table = ngram_index.Vocabulary(vocab)
    rng = np.random.default_rng(seed)
    pool = vocab + [w for e in extra for w in e.split()]
    captions = [" ".join(rng.choice(pool, int(rng.integers(0, 6)))) for _ in range(8)]
    spans = cider.text.normalize_spans(
        captions, "en", options=cider.text.Options(unicode_form=None, lowercase=False,
                                                   remove_punctuation=False))
    tokens = [spans.text[s:e] for s, e in zip(spans.starts, spans.ends, strict=True)]
    assert tokens == [t for c in captions for t in c.split()]
    ids, max_id = table.span_ids(spans)
    unseen = {}  # Numbered above V by first occurrence.
    expected = [table.index.get(t) or unseen.setdefault(t, len(vocab) + 1 + len(unseen))
                for t in tokens]
    np.testing.assert_array_equal(ids, expected)
    assert max_id == len(vocab) + len(unseen)
    for token, i in zip(tokens, ids.tolist(), strict=True):
        assert (i == table.index[token]) if token in table.index else i > len(vocab)


def _normalized_pycocoevalcap(refs, preds, lang, segmenter="char"):
    """pycocoevalcap's per-image scores of the captions as text.normalize tokenizes them."""
    def join(caption):
        return " ".join(cider.text.normalize(caption, lang, segmenter))
    gts = {i: [join(r) for r in rs] for i, rs in enumerate(refs)}
    return Cider().compute_score(gts, {i: [join(p)] for i, p in enumerate(preds)})[1]


def test_non_latin_scripts_agree_with_pycocoevalcap():
    refs = [["Два кота спят на диване.", "Кошки спят"], ["Собака бежит по пляжу!"],
            ["Красная машина на улице.", "Машина"]]
    preds = ["кошки спят на диване", "собака на пляже", "красная машина"]
    np.testing.assert_allclose(cider.CiderScorer(refs, "ru").score(preds).per_image,
                               _normalized_pycocoevalcap(refs, preds, "ru"), atol=1e-12)
    refs = [["一只猫在沙发上睡觉。", "猫在睡觉"], ["一只狗在海滩上跑。"]]
    preds = ["猫在沙发上", "狗在跑"]
    np.testing.assert_allclose(cider.CiderScorer(refs, "zh").score(preds).per_image,
                               _normalized_pycocoevalcap(refs, preds, "zh"), atol=1e-12)


def test_word_segmenter_path(monkeypatch):
    import sys
    import types

    from evaluation.cider import text
    fake = types.ModuleType("jieba")
    fake.lcut = lambda s: [s[i:i + 2] for i in range(0, len(s), 2)]  # pairs of characters
    monkeypatch.setitem(sys.modules, "jieba", fake)
    monkeypatch.setattr(text, "_load_word_segmenter",  # with a cache of its own
                        functools.cache(text._load_word_segmenter.__wrapped__))
    refs = [["一只猫在沙发上睡觉", "猫在睡觉"], ["一只狗在海滩上跑"]]
    preds = ["一只猫在沙发上", "一只狗在跑"]
    result = cider.CiderScorer(refs, "zh", segmenter="word").score(preds)
    assert text.normalize(refs[0][0], "zh", "word") == ["一只", "猫在", "沙发", "上睡", "觉"]
    np.testing.assert_allclose(result.per_image,
                               _normalized_pycocoevalcap(refs, preds, "zh", "word"), atol=1e-12)
