"""The hash tables and groupings under evaluation.cider, against plain Python dictionaries."""

import numpy as np

from evaluation.cider import ngram_index, ngram_match, text


def find(table, key, region=0):
    return int(ngram_match._find(table.keys, table.ids, table.offset[region], table.size[region],
                                 key))


def home_slot(key, size):
    h = key * int(ngram_match._GOLDEN) % (1 << 64)
    return (h >> 32) * size >> 32


def _key_table():
    """(rng, keys, regions, table) of 20000 keys below 2**40 in 7 regions."""
    rng = np.random.default_rng(0)
    keys = rng.choice(1 << 40, size=20000, replace=False)
    region = rng.integers(0, 7, size=keys.size)
    return rng, keys, region, ngram_index.KeyTable(keys, region=region, num_regions=7)


def test_key_table_finds_every_key():
    rng, keys, region, table = _key_table()
    assert table.keys[-1] == -1
    for i in rng.choice(keys.size, 300, replace=False):
        assert find(table, keys[i], region[i]) == i


def test_key_table_finds_no_other_key():
    rng, _, _, table = _key_table()
    absent = rng.integers(1 << 40, 1 << 41, size=100)
    assert all(find(table, k, r) == -1
               for k, r in zip(absent, rng.integers(0, 7, 100), strict=True))


def test_key_table_finds_every_key_even_past_its_end():
    # A table made longer when probes run past its end: 200 keys whose home slots are all
    # in the last quarter of a full table.
    candidates = range(1, 100000)
    keys = np.array([k for k in candidates if home_slot(k, 200) >= 150][:200])
    table = ngram_index.KeyTable(keys, load=1.0)
    assert table.keys.size > 200 + 64  # the first allocation was too short
    assert table.keys[-1] == -1
    assert [find(table, k) for k in keys] == list(range(200))


def test_group_keys_numbers_groups_by_first_occurrence():
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 50, size=1000) << 30
    groups = ngram_index.group_keys(keys)
    expected = {}
    for key in keys.tolist():
        expected.setdefault(key, len(expected))
    assert groups.group.tolist() == [expected[k] for k in keys.tolist()]
    assert keys[groups.first].tolist() == list(expected)
    assert groups.count.tolist() == [int((keys == k).sum()) for k in expected]
    empty = ngram_index.group_keys(np.zeros(0, dtype=np.int64))
    assert empty.first.size == empty.count.size == 0


def _distinct_tokens():
    """(tokens, distinct tokens, their ids) of captions of the same lengths, shared prefixes,
    one character apart, non-BMP characters."""
    captions = ["ab ba abc abd abc ab", "𠀀𠀁 ab ùn un ùn", "", "zz z zz 𠀀𠀁"]
    spans = text.normalize_spans(captions, "en")
    tokens = [spans.text[s:e] for s, e in zip(spans.starts, spans.ends, strict=True)]
    return tokens, *ngram_index.distinct_tokens(spans)


def test_distinct_tokens_are_exact():
    tokens, vocab, ids = _distinct_tokens()
    assert vocab == list(dict.fromkeys(tokens))
    assert [vocab[i - 1] for i in ids] == tokens


def test_span_ids_are_exact():
    _, vocab, _ = _distinct_tokens()
    vocabulary = ngram_index.Vocabulary(vocab[:5])
    queries = text.normalize_spans(["abd ab new abc new 𠀀𠀁 zz"], "en")
    query_ids, max_id = vocabulary.span_ids(queries)
    # Known tokens get their index; unseen ones ids above V, equal ones equal ids.
    assert query_ids.tolist() == [4, 1, 6, 3, 6, 5, 7]
    assert max_id == 7
