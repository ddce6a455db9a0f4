"""Exact integer ids for tokens and n-grams, with static numpy hash tables.

Used by `eval.cider`. Everything here works on whole arrays: a token is an
id 1..V (from `Vocabulary`, which reads token spans of a normalized text
without building a Python string per token), and an n-gram is the pair (id of
its first n - 1 tokens, last token) packed into one int64 (`shift_key`), so
n-gram ids are exact and come order by order. `KeyTable` maps such keys to
dense ids; `group_keys` groups equal keys by one plain sort.
"""

import itertools
import typing

import numpy as np

from eval import ngram_match

KEY_BITS = 62
# Odd 64-bit multiplier (as int64) for hashing keys.
GOLDEN = np.int64(-0x61C8864680B583EB)


def shift_key(prefix, token, token_bits, bound=None):
    """Exact int64 key of (prefix, token), or OverflowError if it does not fit.

    Args:
        prefix: int64 [k] non-negative prefix ids.
        token: int64 [k] token ids below 2^token_bits.
        token_bits: bits of the token part.
        bound: optional number above every prefix, checked instead of the
            prefixes themselves (saving a pass over them).
    """
    largest = bound - 1 if bound is not None else int(prefix.max()) if prefix.size else 0
    if int(largest).bit_length() + token_bits > KEY_BITS:
        raise OverflowError("n-gram keys do not fit in 62 bits; too many tokens or images")
    return (prefix << token_bits) | token


class KeyTable:
    """Static open-addressing (linear probing) map from distinct int64 keys to 0..n-1.

    The table is split into regions (one per image, say), each at most `load`
    full, so that lookups of keys sorted by region walk memory in order. It is
    built in one pass: with keys sorted by home slot, linear probing puts key i
    at max(home_i, slot_{i-1} + 1), a running maximum.

    Attributes (read by the compiled lookups of `eval.ngram_match` too):
        keys: int64 [S] stored keys, -1 in empty slots (the last is always empty).
        ids: int32 [S + 1] id of each slot's key.
        offset: int64 [R] first slot of each region.
        size: uint64 [R] home slots of each region.
    """

    def __init__(self, keys, region=None, num_regions=1, load=0.5):
        capacity = (np.bincount(region, minlength=num_regions) if region is not None
                    else np.array([keys.size]))
        sizes = np.maximum(4, np.ceil(capacity / load).astype(np.int64))
        self.offset = np.cumsum(sizes) - sizes
        self.size = sizes.astype(np.uint64)
        home = self._home(keys, region)
        order = sort_order(home)
        rank = np.arange(keys.size)
        slot = np.empty(keys.size, dtype=np.int64)
        slot[order] = np.maximum.accumulate(home[order] - rank) + rank
        self._max_probe = int((slot - home).max(initial=0))
        # Probes run past the last region instead of wrapping around.
        size = int(sizes.sum()) + self._max_probe + 1
        self.keys = np.full(size, -1, dtype=np.int64)
        self.keys[slot] = keys
        # One extra -1 at the end, so that slot -1 (absent) reads as id -1.
        self.ids = np.full(size + 1, -1, dtype=np.int32)
        self.ids[slot] = rank

    def _home(self, keys, region):
        if region is None:
            offset, size = self.offset[0], self.size[0]
        else:
            offset, size = self.offset[region], self.size[region]
        h = (keys * GOLDEN).view(np.uint64)
        # The top 32 bits of the product, scaled to [0, size) ("fastrange").
        return offset + ((h >> np.uint64(32)) * size >> np.uint64(32)).view(np.int64)

    def find(self, keys, region=None):
        """Returns the id of each key (its index when the table was built), -1 if absent."""
        home = self._home(keys, region)
        stored = self.keys[home]
        hit = stored == keys
        found = np.where(hit, home, -1)
        pending = np.flatnonzero(~hit & (stored >= 0))
        for probe in range(1, self._max_probe + 1):
            if not pending.size:
                break
            slot = home[pending] + probe
            stored = self.keys[slot]
            hit = stored == keys[pending]
            found[pending[hit]] = slot[hit]
            pending = pending[~hit & (stored >= 0)]
        return self.ids[found]


class Groups(typing.NamedTuple):
    """Equal keys grouped: `group` per element, `first` element and `count` per group."""
    group: np.ndarray
    first: np.ndarray
    count: np.ndarray


def group_keys(keys):
    """Groups equal non-negative int64 keys (exactly).

    A plain sort of keys with the element index packed into the low bits is
    several times faster than argsort or np.unique; np.unique is the fallback
    when the packed values would not fit in 63 bits.
    """
    n = keys.size
    if n == 0:
        return Groups(*(np.zeros(0, dtype=np.int64),) * 3)
    index_bits = max(1, (n - 1).bit_length())
    if int(keys.max()).bit_length() + index_bits > 63:
        _, first, group, count = np.unique(keys, return_index=True, return_inverse=True,
                                           return_counts=True)
        return Groups(group.reshape(-1), first, count)
    packed = (keys << index_bits) | np.arange(n)
    packed.sort()
    order = packed & ((1 << index_bits) - 1)
    sorted_keys = packed >> index_bits
    starts = np.empty(n, dtype=bool)
    starts[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=starts[1:])
    run_start = np.flatnonzero(starts)
    group = np.empty(n, dtype=np.int64)
    group[order] = np.cumsum(starts) - 1
    return Groups(group, order[run_start], np.diff(np.append(run_start, n)))


def sort_order(values):
    """np.argsort(values, kind="stable") for non-negative int64, by a plain sort if it can."""
    index_bits = max(1, (values.size - 1).bit_length())
    if not values.size or int(values.max()).bit_length() + index_bits > 63:
        return np.argsort(values, kind="stable")
    packed = (values << index_bits) | np.arange(values.size)
    packed.sort()
    return packed & ((1 << index_bits) - 1)


HASH_BASE = np.uint64(0x100000001B3)  # odd
HASH_BASE_INVERSE = np.uint64(pow(int(HASH_BASE), -1, 1 << 64))
powers = {}


def hash_powers(n):
    """(B^i, B^-i) mod 2^64 for i < n, as uint64 arrays, cached and grown by doubling."""
    if powers.get("size", 0) < n:
        size = 1 << max(10, (n - 1).bit_length())
        for name, base in (("power", HASH_BASE), ("inverse", HASH_BASE_INVERSE)):
            factors = np.full(size, base, dtype=np.uint64)
            factors[0] = 1
            powers[name] = np.cumprod(factors)  # wraps around mod 2^64, as intended
        powers["size"] = size
    return powers["power"][:n], powers["inverse"][:n]


def span_hashes(code_points, starts, ends):
    """62-bit polynomial hash of each code_points[start:end], independent of where it is."""
    power, inverse = hash_powers(code_points.size + 1)
    prefix = np.zeros(code_points.size + 1, dtype=np.uint64)
    np.cumsum(code_points.astype(np.uint64) * power[:code_points.size], out=prefix[1:])
    h = (prefix[ends] - prefix[starts]) * inverse[starts]
    h ^= (ends - starts).astype(np.uint64) * HASH_BASE
    # A bijective mix before dropping two bits, so that no bit pattern of
    # the polynomial (e.g. the low bits of a one-character token) is lost.
    h ^= h >> np.uint64(31)
    h *= GOLDEN.view(np.uint64)
    return (h >> np.uint64(2)).view(np.int64)


class Vocabulary:
    """Token strings -> ids 1..V, from Python strings or, fast, from `text.Spans`.

    The fast path never builds a string for a known token: it looks the
    token's characters up in a hash table of the vocabulary's
    (`eval.ngram_match.token_ids`), comparing them one by one, so ids are exact.
    """

    def __init__(self, tokens):
        self.index = {t: i for i, t in enumerate(tokens, start=1)}
        self._code_points = np.frombuffer(
            "".join(tokens).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
        self._ends = np.cumsum([len(t) for t in tokens], dtype=np.int64)
        self._starts = self._ends - [len(t) for t in tokens]
        self._slots = np.full(1 << max(1, (2 * len(tokens) - 1).bit_length()), -1, np.int64)
        ngram_match.token_table(self._code_points, self._starts, self._ends, self._slots)

    def __len__(self):
        return len(self.index)

    def ids(self, tokens):
        """Ids of token strings; unseen tokens get ids above V, equal tokens equal ids."""
        ids = np.fromiter(map(self.index.get, tokens, itertools.repeat(0)), np.int64,
                          count=len(tokens))
        return self._number_unseen(ids, tokens.__getitem__)

    def span_ids(self, spans):
        """Like `ids`, for the tokens of `text.Spans`."""
        ids = np.zeros(spans.starts.size, dtype=np.int64)
        ngram_match.token_ids(self._slots, self._code_points, self._starts, self._ends,
                              spans.code_points, spans.starts, spans.ends, ids)
        return self._number_unseen(
            ids, lambda i: spans.text[int(spans.starts[i]):int(spans.ends[i])])

    def _number_unseen(self, ids, token):
        unseen = {}
        for i in np.flatnonzero(ids == 0).tolist():
            ids[i] = unseen.setdefault(token(i), len(self.index) + 1 + len(unseen))
        return ids, len(self.index) + len(unseen)


def distinct_tokens(spans):
    """Distinct tokens of `text.Spans`, in order of first occurrence, and each token's id.

    Equal tokens are grouped by a hash of their characters, truncated so that
    the grouping is a plain sort, and every token's characters are compared
    with its group's first: only the distinct tokens become Python strings.

    Returns:
        (list of distinct token strings, int64 [num_tokens] ids 1..V), or None
        if two different tokens share a hash (then group the strings instead).
    """
    length = spans.ends - spans.starts
    if not length.size:
        return [], np.zeros(0, dtype=np.int64)
    index_bits = max(1, (length.size - 1).bit_length())
    hashes = span_hashes(spans.code_points, spans.starts, spans.ends)
    groups = group_keys(hashes >> max(0, index_bits - 1))
    first = groups.first[groups.group]
    if (length != length[first]).any() or not (
            spans.code_points[expand(spans.starts, length)]
            == spans.code_points[expand(spans.starts[first], length)]).all():
        return None
    # Groups are numbered by hash; number them by first occurrence instead.
    order = sort_order(groups.first)
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    starts = spans.starts[groups.first[order]].tolist()
    ends = spans.ends[groups.first[order]].tolist()
    return [spans.text[s:e] for s, e in zip(starts, ends, strict=True)], rank[groups.group] + 1


def positions(lengths):
    """Sequence of each token, and tokens left in its sequence from it on (itself included)."""
    sequence = np.repeat(np.arange(lengths.size), lengths)
    remaining = np.cumsum(lengths)[sequence] - np.arange(sequence.size)
    return sequence, remaining


def expand(starts, counts):
    """Concatenation of range(s, s + c) for each (s, c), as one array."""
    total = int(counts.sum())
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(total)

