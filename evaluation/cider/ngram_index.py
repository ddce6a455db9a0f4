"""Exact integer ids for tokens and n-grams, and the hash tables over them.

A token is an id 1..V (`Vocabulary`); an n-gram is (id of its first n - 1 tokens, last token)
packed into one int64 (`shift_key`). `KeyTable` maps keys to dense ids.
"""

import typing

import numpy as np

from evaluation.cider import ngram_match

KEY_BITS = 62


def shift_key(prefix, token, token_bits):
    """Exact int64 key of (prefix, token), or OverflowError."""
    largest = int(prefix.max()) if prefix.size else 0
    if int(largest).bit_length() + token_bits > KEY_BITS:
        raise OverflowError("n-gram keys do not fit in 62 bits; too many tokens or images")
    return (prefix << token_bits) | token


class KeyTable:
    """Static open-addressing (linear probing) map from distinct int64 keys to 0..n-1, by region.
    Read by `ngram_match`: keys (-1 empty, the last always empty), ids, offset, size per region."""

    def __init__(self, keys, region=None, num_regions=1, load=0.5):
        capacity = (np.bincount(region, minlength=num_regions) if region is not None
                    else np.array([keys.size]))
        sizes = np.maximum(4, np.ceil(capacity / load).astype(np.int64))
        self.offset = np.cumsum(sizes) - sizes
        self.size = sizes.astype(np.uint64)
        region = region if region is not None else np.zeros(0, dtype=np.int64)
        slack = 64
        while True:
            self.keys = np.full(int(sizes.sum()) + slack, -1, dtype=np.int64)
            self.ids = np.full(self.keys.size, -1, dtype=np.int32)
            if ngram_match.insert_keys(keys, region, self.offset, self.size, self.keys,
                                       self.ids):
                break
            slack *= 8


class Groups(typing.NamedTuple):
    """Equal keys grouped: `group` per element, `first` element and `count` per group."""
    group: np.ndarray
    first: np.ndarray
    count: np.ndarray


def group_keys(keys):
    """Groups equal int64 keys (exactly), numbering the groups by first occurrence."""
    group, first, count = (np.empty(keys.size, dtype=np.int64) for _ in range(3))
    slots = np.full(2 * _empty_table_size(keys.size), -1, dtype=np.int64)
    num_groups = ngram_match.group_keys(keys, slots, group, first, count)
    return Groups(group, first[:num_groups], count[:num_groups])


class Vocabulary:
    """Token strings -> ids 1..V; the tokens of `text.Spans` looked up by their characters."""

    def __init__(self, tokens):
        self.index = {t: i for i, t in enumerate(tokens, start=1)}
        self._code_points = np.frombuffer(
            "".join(tokens).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
        self._ends = np.cumsum([len(t) for t in tokens], dtype=np.int64)
        self._starts = self._ends - [len(t) for t in tokens]
        self._slots = _empty_table(len(tokens))
        ngram_match.intern_tokens(self._code_points, self._starts, self._ends, self._slots,
                                  np.empty(len(tokens), np.int64), np.empty(len(tokens), np.int64))

    def __len__(self):
        return len(self.index)

    def span_ids(self, spans):
        """(Ids of the tokens of `text.Spans`, the largest id): unseen tokens get ids above V,
        equal tokens equal ids."""
        ids = np.zeros(spans.starts.size, dtype=np.int64)
        ngram_match.token_ids(self._slots, self._code_points, self._starts, self._ends,
                              spans.code_points, spans.starts, spans.ends, ids)
        unseen = {}
        for i in np.flatnonzero(ids == 0).tolist():
            token = spans.text[int(spans.starts[i]):int(spans.ends[i])]
            ids[i] = unseen.setdefault(token, len(self.index) + 1 + len(unseen))
        return ids, len(self.index) + len(unseen)


def _empty_table_size(num_keys):
    """Slots of a hash table of `num_keys` keys: a power of two, at least twice as many."""
    return 1 << max(1, (2 * num_keys - 1).bit_length())


def _empty_table(num_tokens):
    """-1s for an `intern_tokens` table (`_empty_table_size`)."""
    return np.full(_empty_table_size(num_tokens), -1, dtype=np.int64)


def distinct_tokens(spans):
    """(distinct tokens of `text.Spans` in first-occurrence order, int64 id 1..V of each token)."""
    num_tokens = spans.starts.size
    ids, first = np.empty(num_tokens, np.int64), np.empty(num_tokens, np.int64)
    num_distinct = ngram_match.intern_tokens(spans.code_points, spans.starts, spans.ends,
                                             _empty_table(num_tokens), ids, first)
    starts = spans.starts[first[:num_distinct]].tolist()
    ends = spans.ends[first[:num_distinct]].tolist()
    return [spans.text[s:e] for s, e in zip(starts, ends, strict=True)], ids


def positions(lengths):
    """Sequence of each token, and tokens left in its sequence from it on (itself included)."""
    sequence = np.repeat(np.arange(lengths.size), lengths)
    remaining = np.cumsum(lengths)[sequence] - np.arange(sequence.size)
    return sequence, remaining
