"""CIDEr-D and CIDEr for multilingual captioning, with a jit-compiled JAX kernel.

CIDEr-D (the default) is exactly pycocoevalcap's `Cider` (vrama91/cider's
`CiderD`): for n = 1..4, tf-idf vectors of the n-grams of a caption, with
idf(g) = ln(N) - ln(max(1, df(g))), N the number of images and df(g) the number
of images whose references contain g; per reference, the clipped cosine
sum_g min(h_g, r_g) r_g / (|h| |r|) times a Gaussian length penalty
exp(-(l_h - l_r)^2 / 72), where the reference code's "length" is the number of
bigrams (max(0, words - 1)), a quirk kept here; the mean over n, the mean over
references, times 10. CIDEr (`metric="cider"`) is Vedantam et al.'s formula:
no clipping, no penalty, on the same x10 scale as the authors' code.

Layout. Tokens are integer ids and an n-gram is identified by the pair (id of
its first n - 1 tokens, last token), packed into one int64, so n-gram ids are
exact and come order by order. References are prepared once: global n-gram ids
(for document frequencies), per image its distinct reference n-grams ("union
entries") and per reference its distinct n-grams with counts ("entries").
A call looks the prediction's n-grams up order by order in static numpy hash
tables, one region per image (an n-gram is skipped when its prefix or suffix
already missed), counts them (a bincount over union entries; a sort of packed
keys for the others), and sums the clipped products over the matched entries.
The jit-compiled kernel turns those per-(reference, n) sums and per-(image, n)
norms into cosines, length penalties and per-image means, in float64. Its
arrays are padded to powers of two of at least 2^14, so one compilation
serves every XM3600 language.

Why the n-gram matching is numpy and not XLA: it is hash lookups, sorts and
bincounts over ragged data; on CPU, XLA's gathers are no faster than numpy's,
its sort is ~7x slower, and per-call shapes would mean recompilations.
"""

import argparse
import dataclasses
import functools
import itertools
import json
import math
import os
import sys
import typing
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from data import languages, xm3600
from eval import text

METRICS = ("cider-d", "cider")
REFERENCE_FIELDS = ("caption", "caption/tokenized")
MAX_N = 4
SIGMA = 6.0
_DF_FORMAT = "cider-document-frequency"
# Smallest padded size of the kernel's arrays: one compilation serves every
# XM3600 language (up to 16384 references), and tiny inputs cost nothing more.
_MIN_PAD = 1 << 14
_KEY_BITS = 62
# Odd 64-bit multiplier (as int64) for hashing keys.
_GOLDEN = np.int64(-0x61C8864680B583EB)


class InputError(ValueError):
    """Bad input to the scorer or the CLI; the message names the file, line or key."""


def _shift_key(prefix, token, token_bits):
    """Exact int64 key of (prefix, token), or OverflowError if it does not fit."""
    if prefix.size and int(prefix.max()).bit_length() + token_bits > _KEY_BITS:
        raise OverflowError("n-gram keys do not fit in 62 bits; too many tokens or images")
    return (prefix << token_bits) | token


class _KeyTable:
    """Static open-addressing (linear probing) map from distinct int64 keys to 0..n-1.

    The table is split into regions (one per image, say), each at most `load`
    full, so that lookups of keys sorted by region walk memory in order. It is
    built in one pass: with keys sorted by home slot, linear probing puts key i
    at max(home_i, slot_{i-1} + 1), a running maximum.
    """

    def __init__(self, keys, region=None, num_regions=1, load=0.5):
        capacity = (np.bincount(region, minlength=num_regions) if region is not None
                    else np.array([keys.size]))
        sizes = np.maximum(4, np.ceil(capacity / load).astype(np.int64))
        self._offset = np.cumsum(sizes) - sizes
        self._size = sizes.astype(np.uint64)
        home = self._home(keys, region)
        order = _sort_order(home)
        rank = np.arange(keys.size)
        slot = np.empty(keys.size, dtype=np.int64)
        slot[order] = np.maximum.accumulate(home[order] - rank) + rank
        self._max_probe = int((slot - home).max(initial=0))
        # Probes run past the last region instead of wrapping around.
        size = int(sizes.sum()) + self._max_probe + 1
        self._keys = np.full(size, -1, dtype=np.int64)
        self._keys[slot] = keys
        # One extra -1 at the end, so that slot -1 (absent) reads as id -1.
        self._ids = np.full(size + 1, -1, dtype=np.int32)
        self._ids[slot] = rank

    def _home(self, keys, region):
        if region is None:
            offset, size = self._offset[0], self._size[0]
        else:
            offset, size = self._offset[region], self._size[region]
        h = (keys * _GOLDEN).view(np.uint64)
        # The top 32 bits of the product, scaled to [0, size) ("fastrange").
        return offset + ((h >> np.uint64(32)) * size >> np.uint64(32)).view(np.int64)

    def find(self, keys, region=None):
        """Returns the id of each key (its index when the table was built), -1 if absent."""
        home = self._home(keys, region)
        stored = self._keys[home]
        hit = stored == keys
        found = np.where(hit, home, -1)
        pending = np.flatnonzero(~hit & (stored >= 0))
        for probe in range(1, self._max_probe + 1):
            if not pending.size:
                break
            slot = home[pending] + probe
            stored = self._keys[slot]
            hit = stored == keys[pending]
            found[pending[hit]] = slot[hit]
            pending = pending[~hit & (stored >= 0)]
        return self._ids[found]


class _Groups(typing.NamedTuple):
    """Equal keys grouped: `group` per element, `first` element and `count` per group."""
    group: np.ndarray
    first: np.ndarray
    count: np.ndarray


def _group_keys(keys):
    """Groups equal non-negative int64 keys (exactly).

    A plain sort of keys with the element index packed into the low bits is
    several times faster than argsort or np.unique; np.unique is the fallback
    when the packed values would not fit in 63 bits.
    """
    n = keys.size
    if n == 0:
        return _Groups(*(np.zeros(0, dtype=np.int64),) * 3)
    index_bits = max(1, (n - 1).bit_length())
    if int(keys.max()).bit_length() + index_bits > 63:
        _, first, group, count = np.unique(keys, return_index=True, return_inverse=True,
                                           return_counts=True)
        return _Groups(group.reshape(-1), first, count)
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
    return _Groups(group, order[run_start], np.diff(np.append(run_start, n)))


def _sort_order(values):
    """np.argsort(values, kind="stable") for non-negative int64, by a plain sort if it can."""
    index_bits = max(1, (values.size - 1).bit_length())
    if not values.size or int(values.max()).bit_length() + index_bits > 63:
        return np.argsort(values, kind="stable")
    packed = (values << index_bits) | np.arange(values.size)
    packed.sort()
    return packed & ((1 << index_bits) - 1)


_HASH_BASE = np.uint64(0x100000001B3)  # odd
_HASH_BASE_INVERSE = np.uint64(pow(int(_HASH_BASE), -1, 1 << 64))
_powers = {}


def _hash_powers(n):
    """(B^i, B^-i) mod 2^64 for i < n, as uint64 arrays, cached and grown by doubling."""
    if _powers.get("size", 0) < n:
        size = 1 << max(10, (n - 1).bit_length())
        for name, base in (("power", _HASH_BASE), ("inverse", _HASH_BASE_INVERSE)):
            factors = np.full(size, base, dtype=np.uint64)
            factors[0] = 1
            _powers[name] = np.cumprod(factors)  # wraps around mod 2^64, as intended
        _powers["size"] = size
    return _powers["power"][:n], _powers["inverse"][:n]


def _span_hashes(code_points, starts, ends):
    """62-bit polynomial hash of each code_points[start:end], independent of where it is."""
    power, inverse = _hash_powers(code_points.size + 1)
    prefix = np.zeros(code_points.size + 1, dtype=np.uint64)
    np.cumsum(code_points.astype(np.uint64) * power[:code_points.size], out=prefix[1:])
    h = (prefix[ends] - prefix[starts]) * inverse[starts]
    h ^= (ends - starts).astype(np.uint64) * _HASH_BASE
    # A bijective mix before dropping two bits, so that no bit pattern of
    # the polynomial (e.g. the low bits of a one-character token) is lost.
    h ^= h >> np.uint64(31)
    h *= _GOLDEN.view(np.uint64)
    return (h >> np.uint64(2)).view(np.int64)


def _short_keys(code_points, starts, lengths):
    """Exact keys of tokens of at most 3 characters: (c + 1) per character, 21 bits each."""
    padded = np.concatenate([code_points, np.zeros(2, dtype=code_points.dtype)])
    key = padded[starts].astype(np.int64) + 1
    for k in (1, 2):
        key |= np.where(lengths > k, padded[starts + k].astype(np.int64) + 1, 0) << (21 * k)
    return key


class _Vocabulary:
    """Token strings -> ids 1..V, from Python strings or, fast, from `text.Spans`.

    The fast path never builds a string for a known token: tokens of up to 3
    characters are looked up by their code points packed into one int64;
    longer ones by a hash of their characters, which are then compared with
    the vocabulary's, so ids are exact either way.
    """

    def __init__(self, tokens):
        self.index = {t: i for i, t in enumerate(tokens, start=1)}
        self._code_points = np.frombuffer(
            "".join(tokens).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        lengths = np.array([len(t) for t in tokens], dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        short = lengths <= 3
        self._short_ids = np.flatnonzero(short)
        self._short = _KeyTable(_short_keys(self._code_points, starts[short], lengths[short]))
        self._long_ids = np.flatnonzero(~short)
        self._long_starts, self._long_lengths = starts[~short], lengths[~short]
        hashes = _span_hashes(self._code_points, self._long_starts,
                              self._long_starts + self._long_lengths)
        # Two tokens with one hash (odds ~V^2 / 2^63) would need the slow path.
        self._long = _KeyTable(hashes) if np.unique(hashes).size == hashes.size else None

    def __len__(self):
        return len(self.index)

    def ids(self, tokens):
        """Ids of token strings; unseen tokens get ids above V, equal tokens equal ids."""
        ids = np.fromiter(map(self.index.get, tokens, itertools.repeat(0)), np.int64,
                          count=len(tokens))
        return self._number_unseen(ids, tokens.__getitem__)

    def span_ids(self, spans):
        """Like `ids`, for the tokens of `text.Spans`."""
        if self._long is None:
            return self.ids(spans.tokens())
        length = spans.ends - spans.starts
        ids = np.zeros(length.size, dtype=np.int64)
        short = np.flatnonzero(length <= 3)
        found = self._short.find(_short_keys(spans.code_points, spans.starts[short],
                                             length[short]))
        ids[short[found >= 0]] = self._short_ids[found[found >= 0]] + 1
        long = np.flatnonzero(length > 3)
        found = self._long.find(_span_hashes(spans.code_points, spans.starts[long],
                                             spans.ends[long]))
        check = long[found >= 0]
        found = found[found >= 0]
        same_length = length[check] == self._long_lengths[found]
        check, found = check[same_length], found[same_length]
        if check.size:
            size = length[check]
            same = (spans.code_points[_expand(spans.starts[check], size)]
                    == self._code_points[_expand(self._long_starts[found], size)])
            equal = np.logical_and.reduceat(same, np.cumsum(size) - size)
            ids[check[equal]] = self._long_ids[found[equal]] + 1
        return self._number_unseen(
            ids, lambda i: spans.text[int(spans.starts[i]):int(spans.ends[i])])

    def _number_unseen(self, ids, token):
        unseen = {}
        for i in np.flatnonzero(ids == 0).tolist():
            ids[i] = unseen.setdefault(token(i), len(self.index) + 1 + len(unseen))
        return ids, len(self.index) + len(unseen)


def _distinct_tokens(spans):
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
    hashes = _span_hashes(spans.code_points, spans.starts, spans.ends)
    groups = _group_keys(hashes >> max(0, index_bits - 1))
    first = groups.first[groups.group]
    if (length != length[first]).any() or not (
            spans.code_points[_expand(spans.starts, length)]
            == spans.code_points[_expand(spans.starts[first], length)]).all():
        return None
    # Groups are numbered by hash; number them by first occurrence instead.
    order = _sort_order(groups.first)
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    starts = spans.starts[groups.first[order]].tolist()
    ends = spans.ends[groups.first[order]].tolist()
    return [spans.text[s:e] for s, e in zip(starts, ends, strict=True)], rank[groups.group] + 1


def _positions(lengths):
    """Sequence of each token, and tokens left in its sequence from it on (itself included)."""
    sequence = np.repeat(np.arange(lengths.size), lengths)
    remaining = np.cumsum(lengths)[sequence] - np.arange(sequence.size)
    return sequence, remaining


def _expand(starts, counts):
    """Concatenation of range(s, s + c) for each (s, c), as one array."""
    total = int(counts.sum())
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(total)


def _size_class(n):
    """Padded size: the next power of two, so that similar sizes share a compilation."""
    return max(_MIN_PAD, 1 << max(0, int(n) - 1).bit_length())


def _pad(array, size, fill):
    out = np.full((size,) + array.shape[1:], fill, dtype=array.dtype)
    out[:array.shape[0]] = array
    return out


@dataclasses.dataclass(frozen=True)
class DocumentFrequency:
    """Document frequencies of one language's reference n-grams.

    Attributes:
        lang: language code.
        num_images: N, the number of images they were counted over.
        counts: n-gram (its tokens joined by one space) -> number of images
            whose references contain it, in 1..num_images.
        normalization: `text.Options.describe(segmenter)` of the tokens.
    """
    lang: str
    num_images: int
    counts: dict
    normalization: str

    def save(self, path):
        """Writes a JSON file holding this language (see `save_document_frequencies`)."""
        save_document_frequencies(path, [self])

    @classmethod
    def load(cls, path, lang=None):
        """Reads one language from a file written by `save` or `save_document_frequencies`.

        Args:
            path: the JSON file.
            lang: which language; may be left out when the file holds one.
        """
        dfs = load_document_frequencies(path)
        if lang is None:
            if len(dfs) != 1:
                raise InputError(f"{path}: holds {', '.join(dfs)}; say which language to load")
            return next(iter(dfs.values()))
        if lang not in dfs:
            raise InputError(f"{path}: no document frequencies for {lang!r} (it has "
                             f"{', '.join(dfs)})")
        return dfs[lang]


def save_document_frequencies(path, dfs):
    """Writes document frequencies of several languages to one JSON file.

    The file is {"format": "cider-document-frequency", "version": 1,
    "languages": {lang: {"num_images": N, "normalization": ..., "df": {n-gram: count}}}}.
    """
    payload = {"format": _DF_FORMAT, "version": 1, "languages": {
        df.lang: {"num_images": df.num_images, "normalization": df.normalization,
                  "df": df.counts} for df in dfs}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, ensure_ascii=False)


def _parse_df_entry(path, lang, entry):
    where = f"{path}: language {lang!r}"
    if not isinstance(entry, dict) or set(entry) != {"num_images", "normalization", "df"}:
        raise InputError(f"{where}: expected keys num_images, normalization, df")
    num_images = entry["num_images"]
    if not isinstance(num_images, int) or isinstance(num_images, bool) or num_images < 1:
        raise InputError(f"{where}: num_images must be a positive integer, got {num_images!r}")
    if not isinstance(entry["df"], dict) or not isinstance(entry["normalization"], str):
        raise InputError(f"{where}: df must be an object and normalization a string")
    for ngram, count in entry["df"].items():
        tokens = ngram.split(" ")
        if not 1 <= len(tokens) <= MAX_N or not all(tokens) or ngram != " ".join(ngram.split()):
            raise InputError(f"{where}: n-gram {ngram!r} is not 1-{MAX_N} tokens joined by "
                             f"single spaces")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= num_images:
            raise InputError(f"{where}: n-gram {ngram!r} has count {count!r}, expected an "
                             f"integer in 1..{num_images}")
    return DocumentFrequency(lang, num_images, entry["df"], entry["normalization"])


def load_document_frequencies(path):
    """Reads a file written by `save_document_frequencies`; returns {lang: DocumentFrequency}."""
    if not os.path.exists(path):
        raise InputError(f"document frequency file not found: {path}")
    with open(path, encoding="utf-8") as f:
        try:
            payload = json.load(f)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(payload, dict) or payload.get("format") != _DF_FORMAT:
        raise InputError(f"{path}: not a document frequency file (no \"format\": "
                         f"\"{_DF_FORMAT}\")")
    if payload.get("version") != 1 or not isinstance(payload.get("languages"), dict):
        raise InputError(f"{path}: unsupported version {payload.get('version')!r} or no "
                         f"\"languages\" object")
    return {lang: _parse_df_entry(path, lang, entry)
            for lang, entry in payload["languages"].items()}


class _RefArrays(typing.NamedTuple):
    """Per-reference side of the kernel, padded."""
    ref_norm: jax.Array   # [C, 4] |r| per reference and n
    ref_len: jax.Array    # [C] reference length (bigram count)
    ref_image: jax.Array  # [C] image of each reference, ascending
    ref_count: jax.Array  # [I] references per image


@functools.partial(jax.jit, static_argnames=("clipped",))
def _kernel(refs, dot, hyp_norm2, hyp_len, *, clipped):
    """Per-image scores from per-(reference, n) and per-(image, n) sums.

    Args:
        refs: `_RefArrays`.
        dot: [C * 4] per reference and n, sum over the n-grams g it shares
            with its image's prediction of min(tf_h, tf_r) tf_r idf^2 (CIDEr-D)
            or tf_h tf_r idf^2 (CIDEr).
        hyp_norm2: [I * 4] squared tf-idf norm of each prediction, per n.
        hyp_len: [I] prediction length (bigram count).
        clipped: CIDEr-D (length penalty) rather than CIDEr.

    Returns:
        [I] float64 per-image scores.
    """
    num_images = refs.ref_count.shape[0]
    num_refs = refs.ref_norm.shape[0]
    dot = dot.reshape(num_refs, MAX_N)  # [C, 4]
    hyp_norm = jnp.sqrt(hyp_norm2).reshape(num_images, MAX_N)  # [I, 4]
    denom = hyp_norm[refs.ref_image] * refs.ref_norm  # [C, 4]
    # Where a norm is 0 the dot product is 0 too; the reference leaves it undivided.
    cosine = jnp.where(denom > 0, dot / jnp.where(denom > 0, denom, 1.0), dot)
    if clipped:
        delta = hyp_len[refs.ref_image].astype(dot.dtype) - refs.ref_len  # [C]
        cosine = cosine * jnp.exp(-delta ** 2 / (2 * SIGMA ** 2))[:, None]
    per_ref = cosine.mean(axis=1)  # [C]
    per_image = jax.ops.segment_sum(per_ref, refs.ref_image, num_images,
                                    indices_are_sorted=True)  # [I]
    return per_image / refs.ref_count * 10.0


@dataclasses.dataclass(frozen=True)
class CiderResult:
    """Scores of one call.

    Attributes:
        corpus: mean of the per-image scores.
        per_image: float64 [num_images] (or [len(indices)]) scores.
    """
    corpus: float
    per_image: np.ndarray


class _OrderTables(typing.NamedTuple):
    """What a call needs to know about the reference n-grams of one order n."""
    known: _KeyTable          # (known id of prefix, token) -> known id
    idf: np.ndarray           # [K + 1] idf per known id; the last entry (id -1): ln N
    union: _KeyTable          # (union id of prefix, token), per image -> union id
    union_known: np.ndarray   # [U] known id of each union entry
    union_idf: np.ndarray     # [U] its idf
    union_segment: np.ndarray  # [U] image * 4 + (n - 1)
    entry_start: np.ndarray   # [U] first entry of each union entry's references
    entry_count: np.ndarray   # [U] how many references of its image have it
    entry_tf: np.ndarray      # [E] count in the reference, entries sorted by union id
    entry_segment: np.ndarray  # [E] reference * 4 + (n - 1)


class CiderScorer:
    """Scores predictions against fixed references of one language.

    The references are normalized, their n-grams indexed and their tf-idf
    norms computed once, here; `score` then only tokenizes the predictions,
    looks their n-grams up and runs the compiled kernel.

    Args:
        references: per image, its raw reference strings (at least one).
        lang: language code.
        metric: "cider-d" (default) or "cider".
        df: `DocumentFrequency` to use instead of counting over `references`
            (N is then `df.num_images`).
        segmenter: "char" or "word" (see `eval.text`).
        options: other normalization settings (`text.Options`).
    """

    def __init__(self, references, lang, metric="cider-d", df=None, segmenter="char",
                 options=text.DEFAULT_OPTIONS):
        if metric not in METRICS:
            raise InputError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")
        self.lang, self.metric, self.segmenter, self.options = lang, metric, segmenter, options
        self.normalization = options.describe(segmenter)
        if isinstance(references, str):
            raise InputError("references must be a list (per image) of lists of strings")
        references = [refs if isinstance(refs, str) else list(refs) for refs in references]
        for i, refs in enumerate(references):
            if isinstance(refs, str) or not refs:
                raise InputError(f"image {i}: expected a non-empty list of reference strings, "
                                 f"got {refs!r}")
        if not references:
            raise InputError("no images to score: the reference list is empty")
        self.num_images = len(references)
        if df is not None:
            if df.lang != lang:
                raise InputError(f"document frequencies are for {df.lang!r}, not {lang!r}")
            if df.normalization != self.normalization:
                raise InputError(f"document frequencies were computed with normalization "
                                 f"{df.normalization!r}, this scorer uses {self.normalization!r}")
        elif self.num_images == 1:
            warnings.warn(
                "CIDEr over a single image with document frequencies from its own references "
                "is 0 for any caption: every idf is ln(1) - ln(1) = 0. Pass document "
                "frequencies of the full set (df=..., --df FILE).", stacklevel=2)
        self._given_df = df
        self._ref_image = np.repeat(np.arange(self.num_images),
                                    [len(refs) for refs in references])
        flat = [caption for refs in references for caption in refs]
        try:
            # Tokens as spans of the normalized text, grouped without making a
            # string per token; strings where that is not possible.
            spans = text.normalize_spans(flat, lang, segmenter, options)
            distinct = _distinct_tokens(spans) if spans is not None else None
            if distinct is not None:
                (ref_vocab, ref_ids), ref_tokens = distinct, None
                self._ref_lengths = spans.lengths
                self._ref_token = lambda p: spans.text[int(spans.starts[p]):int(spans.ends[p])]
            else:
                batch = text.normalize_batch(flat, lang, segmenter, options)
                ref_tokens, ref_ids = batch.tokens, None
                ref_vocab = list(dict.fromkeys(ref_tokens))
                self._ref_lengths, self._ref_token = batch.lengths, batch.tokens.__getitem__
        except text.NormalizationError:
            for i, refs in enumerate(references):
                if not all(isinstance(r, str) for r in refs):
                    raise InputError(f"image {i}: references must be strings, got "
                                     f"{refs!r}") from None
            raise
        self._prepare(df, ref_vocab, ref_ids, ref_tokens)

    def _prepare(self, df, ref_vocab, ref_ids, ref_tokens):
        """Indexes the reference n-grams, order by order.

        Args:
            df: the given `DocumentFrequency`, or None.
            ref_vocab: distinct reference tokens, in order of first occurrence.
            ref_ids: int64 [num_ref_tokens] their ids (1-based), or None to
                look `ref_tokens` up.
            ref_tokens: the reference tokens as strings, when ref_ids is None.
        """
        df_ngrams = [ngram.split(" ") for ngram in df.counts] if df is not None else []
        df_tokens = [t for ngram in df_ngrams for t in ngram]
        self._vocab = _Vocabulary(list(dict.fromkeys(ref_vocab + df_tokens)))
        self._token_bits = len(self._vocab).bit_length()
        if ref_ids is None:
            ref_ids = np.fromiter(map(self._vocab.index.__getitem__, ref_tokens), np.int64,
                                  count=len(ref_tokens))
        ids = np.concatenate([ref_ids, np.fromiter(map(self._vocab.index.__getitem__, df_tokens),
                                                   np.int64, count=len(df_tokens))])
        num_refs = self._ref_lengths.size
        lengths = np.concatenate([self._ref_lengths,
                                  np.array([len(g) for g in df_ngrams], dtype=np.int64)])
        sequence, remaining = _positions(lengths)
        num_ref_tokens = int(self._ref_lengths.sum())
        self._log_n = math.log(float(df.num_images if df is not None else self.num_images))
        bits = self._token_bits

        self._tables, self._known_first, self._doc_freq = [], [], []
        ref_segments = []
        # Positions where an n-gram starts, reference tokens first; the state of
        # the (n-1)-grams there, starting with the empty 0-grams.
        at, ref_end = np.arange(ids.size), num_ref_tokens
        known_ids = np.zeros(ids.size, dtype=np.int64)
        union_ids = self._ref_image[sequence[:num_ref_tokens]]
        entry_ids = sequence[:num_ref_tokens]
        for n in range(1, MAX_N + 1):
            prev_known, prev_union, prev_entry = known_ids, union_ids, entry_ids
            if n > 1:
                keep = np.flatnonzero(remaining[at] >= n)
                ref_keep = keep[:np.searchsorted(keep, ref_end)]
                at, ref_end = at[keep], ref_keep.size
                prev_known = known_ids[keep]
                prev_union, prev_entry = union_ids[ref_keep], entry_ids[ref_keep]
            token = ids[at + n - 1]
            # Global ids of the n-grams of the references and of the df file.
            known_keys = _shift_key(prev_known, token, bits)
            # Groups are numbered in key order; every vocabulary token occurs, so
            # the id of a unigram is its token id - 1.
            known = _group_keys(known_keys)
            if n == 1 and known.first.size != len(self._vocab):
                raise AssertionError("unigram ids are not token ids")
            known_table = _KeyTable(known_keys[known.first])
            num_known = known.first.size
            self._known_first.append(at[known.first])

            # Per image, its distinct reference n-grams: the union entries.
            ref_at, ref_token = at[:ref_end], token[:ref_end]
            union_keys = _shift_key(prev_union, ref_token, bits)
            union = _group_keys(union_keys)
            union_image = self._ref_image[sequence[ref_at[union.first]]]
            union_table = _KeyTable(union_keys[union.first], region=union_image,
                                    num_regions=self.num_images)
            union_known = known.group[:ref_end][union.first]

            if df is None:
                doc_freq = np.bincount(union_known, minlength=num_known)
            else:
                # Each df n-gram is a sequence of its own, whose n-gram of order
                # len(sequence) starts at its first token.
                doc_freq = np.zeros(num_known, dtype=np.int64)
                whole = np.flatnonzero((sequence[at] >= num_refs)
                                       & (lengths[sequence[at]] == n))
                counts = np.fromiter(df.counts.values(), np.int64, count=len(df.counts))
                doc_freq[known.group[whole]] = counts[sequence[at[whole]] - num_refs]
            self._doc_freq.append(doc_freq)
            idf = self._log_n - np.log(np.maximum(1.0, doc_freq))

            # Per reference, its distinct n-grams and their counts, by union entry.
            entry = _group_keys(_shift_key(prev_entry, ref_token, bits))
            entry_union = union.group[entry.first]
            by_union = _sort_order(entry_union)
            entry_count = np.bincount(entry_union, minlength=union.first.size)
            entry_ref = sequence[ref_at[entry.first]]
            entry_tf = entry.count[by_union]
            entry_segment = entry_ref[by_union] * MAX_N + (n - 1)
            weight = entry_tf * idf[union_known[entry_union[by_union]]]
            ref_segments.append((entry_segment, weight ** 2))

            known_ids, union_ids, entry_ids = known.group, union.group, entry.group
            self._tables.append(_OrderTables(
                known=known_table, idf=np.append(idf, self._log_n), union=union_table,
                union_known=union_known.astype(np.int32), union_idf=idf[union_known],
                union_segment=(union_image * MAX_N + (n - 1)).astype(np.int32),
                entry_start=(np.cumsum(entry_count) - entry_count).astype(np.int32),
                entry_count=entry_count.astype(np.int32), entry_tf=entry_tf.astype(np.int32),
                entry_segment=entry_segment.astype(np.int32)))

        segments = np.concatenate([s for s, _ in ref_segments])
        weights = np.concatenate([w for _, w in ref_segments])
        ref_norm = np.sqrt(np.bincount(segments, weights=weights, minlength=num_refs * MAX_N))
        ref_len = np.maximum(0, self._ref_lengths - 1).astype(np.float64)
        num_refs_pad = _size_class(num_refs)
        self._num_images_pad = num_images_pad = _size_class(self.num_images)
        self._num_refs_pad = num_refs_pad
        arrays = _RefArrays(
            ref_norm=_pad(ref_norm.reshape(num_refs, MAX_N), num_refs_pad, 0.0),
            ref_len=_pad(ref_len, num_refs_pad, 0.0),
            # Padding references score 0; the last image can absorb them.
            ref_image=_pad(self._ref_image, num_refs_pad, num_images_pad - 1).astype(np.int32),
            ref_count=_pad(np.bincount(self._ref_image).astype(np.float64),
                           num_images_pad, 1.0))
        # float64 in the kernel: float32 sums of idf^2 terms (up to ~70 each)
        # lose about 1e-6 relative, which is the agreement promised.
        with jax.enable_x64(True):
            self._refs = jax.tree.map(jnp.asarray, arrays)

    @property
    def document_frequency(self):
        """The `DocumentFrequency` in use (counted over the references unless given)."""
        if self._given_df is not None:
            return self._given_df
        counts = {}
        for n, (first, doc_freq) in enumerate(
                zip(self._known_first, self._doc_freq, strict=True), 1):
            for k in np.flatnonzero(doc_freq).tolist():
                start = int(first[k])
                ngram = " ".join(self._ref_token(p) for p in range(start, start + n))
                counts[ngram] = int(doc_freq[k])
        return DocumentFrequency(self.lang, self.num_images, counts, self.normalization)

    def _hyp_statistics(self, ids, max_id, lengths, image):
        """The kernel's per-call inputs (see `_kernel`), order by order.

        Arrays of order n are aligned with the positions where an n-gram
        starts; those of order n + 1 are a subset, taken by compaction.

        Args:
            ids: int64 [num_tokens] token ids of the predictions.
            max_id: the largest id there can be.
            lengths: int64 [num_predictions] tokens per prediction.
            image: int64 [num_predictions] image of each prediction.
        """
        caption, remaining = _positions(lengths)
        vocab_size, bits, call_bits = len(self._vocab), self._token_bits, max_id.bit_length()
        num_refs_pad = self._num_refs_pad
        hyp_norm2 = np.zeros(self._num_images_pad * MAX_N)
        dot = np.zeros(num_refs_pad * MAX_N)
        at = np.arange(ids.size)
        at_image = image[caption]
        # State of the (n-1)-grams at `at`, starting with the empty 0-grams, whose
        # "union entry" is the image and whose identity is the caption.
        union, known = at_image, np.zeros(ids.size, dtype=np.int64)
        ident, count = caption, np.full(ids.size, 2)
        for n, tables in enumerate(self._tables, start=1):
            prev_union, prev_known, prev_ident, prev_count = union, known, ident, count
            if n > 1:
                # The n-gram at p is the (n-1)-grams at p and p + 1 overlapped;
                # the one at p + 1 is the next entry of the previous order.
                keep = np.flatnonzero(remaining[at] >= n)
                at, at_image = at[keep], at_image[keep]
                prev_union, prev_known = union[keep], known[keep]
                suffix_union, suffix_known = union[keep + 1], known[keep + 1]
                prev_ident, prev_count = ident[keep], count[keep]
            token = ids[at + n - 1]

            # Is it one of its image's reference n-grams (a union entry)? Not
            # unless its prefix and suffix are.
            union = np.full(at.size, -1, dtype=np.int64)
            if n == 1:
                look = np.flatnonzero(token <= vocab_size)
            else:
                look = np.flatnonzero((prev_union >= 0) & (suffix_union >= 0))
            union[look] = tables.union.find(
                _shift_key(prev_union[look], token[look], bits), region=at_image[look])
            inside = np.flatnonzero(union >= 0)
            outside = np.flatnonzero(union < 0)
            inside_union = union[inside]
            # A union entry identifies (image, n-gram): counting is a bincount.
            union_tf = np.bincount(inside_union, minlength=tables.union_idf.size)
            matched = np.flatnonzero(union_tf)
            hyp_tf = union_tf[matched]
            idf = tables.union_idf[matched]
            hyp_norm2 += np.bincount(tables.union_segment[matched], weights=(hyp_tf * idf) ** 2,
                                     minlength=hyp_norm2.size)
            # Clipped dot products over the (reference, n-gram) entries of the
            # matched union entries.
            repeat = tables.entry_count[matched]
            entry = _expand(tables.entry_start[matched], repeat)
            hyp_tf = np.repeat(hyp_tf, repeat)
            ref_tf = tables.entry_tf[entry]
            overlap = np.minimum(hyp_tf, ref_tf) if self.metric == "cider-d" else hyp_tf
            dot += np.bincount(tables.entry_segment[entry],
                               weights=overlap * ref_tf * np.repeat(idf ** 2, repeat),
                               minlength=dot.size)

            # The other n-grams: the df from their global id, if they have one,
            # and their count, by grouping equal (identity of prefix, token) keys
            # of one caption; only those whose prefix repeats can repeat.
            if n == 1:
                outside_known = np.where(token[outside] <= vocab_size, token[outside] - 1, -1)
            else:
                outside_known = np.full(outside.size, -1, dtype=np.int64)
                look = np.flatnonzero((prev_known[outside] >= 0) & (suffix_known[outside] >= 0))
                outside_known[look] = tables.known.find(_shift_key(
                    prev_known[outside[look]], token[outside[look]], bits))
            outside_tf = np.ones(outside.size, dtype=np.int64)
            repeats = outside[prev_count[outside] >= 2]
            groups = _group_keys(_shift_key(prev_ident[repeats], token[repeats], call_bits))
            outside_tf[prev_count[outside] >= 2] = groups.count[groups.group]
            hyp_norm2 += np.bincount(at_image[outside] * MAX_N + (n - 1),
                                     weights=outside_tf * tables.idf[outside_known] ** 2,
                                     minlength=hyp_norm2.size)

            # State for order n + 1. Identities: union entries first, then groups.
            count = np.ones(at.size, dtype=np.int64)
            count[inside] = union_tf[inside_union]
            count[outside] = outside_tf
            ident = np.full(at.size, -1, dtype=np.int64)
            ident[inside] = inside_union
            ident[repeats] = tables.union_idf.size + groups.group
            known = np.empty(at.size, dtype=np.int64)
            known[inside] = tables.union_known[inside_union]
            known[outside] = outside_known
        hyp_len = np.zeros(self._num_images_pad, dtype=np.int32)
        hyp_len[image] = np.maximum(0, lengths - 1)
        return dot, hyp_norm2, hyp_len

    def score(self, predictions, indices=None):
        """Scores one predicted caption per image.

        Args:
            predictions: raw caption strings, one per image (or per `indices`).
            indices: optional distinct image indices the predictions are for;
                the other images are left out. Document frequencies stay those
                of all references.

        Returns:
            A `CiderResult`; per_image follows `predictions`.
        """
        predictions = list(predictions)
        if indices is None:
            image = np.arange(self.num_images)
        else:
            image = np.asarray(indices, dtype=np.int64).reshape(-1)
            if image.size and (image.min() < 0 or image.max() >= self.num_images):
                raise InputError(f"indices must be in 0..{self.num_images - 1}")
            if np.unique(image).size != image.size:
                raise InputError("indices must be distinct")
        if len(predictions) != image.size:
            raise InputError(f"got {len(predictions)} predictions for {image.size} images")
        if not predictions:
            raise InputError("no predictions to score")
        spans = text.normalize_spans(predictions, self.lang, self.segmenter, self.options)
        if spans is not None:
            ids, max_id = self._vocab.span_ids(spans)
            lengths = spans.lengths
        else:
            batch = text.normalize_batch(predictions, self.lang, self.segmenter, self.options)
            ids, max_id = self._vocab.ids(batch.tokens)
            lengths = batch.lengths
        inputs = self._hyp_statistics(ids, max_id, lengths, image)
        with jax.enable_x64(True):
            per_image = np.asarray(_kernel(self._refs, *inputs,
                                           clipped=self.metric == "cider-d"))
        per_image = per_image[image]
        return CiderResult(float(per_image.mean()), per_image)


# Command line: python -m eval.cider --references captions.jsonl --predictions preds.jsonl


class Predictions(dict):
    """lang -> {image key -> caption}, remembering the file and line of each prediction."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        self.lines = {}

    def where(self, lang, key):
        """"file:line" of the prediction for (lang, key), or the file name."""
        line = self.lines.get((lang, key))
        return f"{self.path}:{line}" if line else str(self.path)


def _parse_prediction(line, where):
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    missing = [k for k in ("image/key", "lang", "caption") if k not in obj]
    if missing:
        raise InputError(f"{where}: missing field {', '.join(map(repr, missing))}")
    key, lang, caption = obj["image/key"], obj["lang"], obj["caption"]
    if not isinstance(key, str) or not key:
        raise InputError(f"{where}: \"image/key\" must be a non-empty string, got {key!r}")
    if lang not in languages.XM3600_LANGS:
        raise InputError(f"{where}: image {key!r}: unknown language {lang!r}; known: "
                         f"{', '.join(languages.XM3600_LANGS)}")
    if not isinstance(caption, str):
        raise InputError(f"{where}: image {key!r}: \"caption\" must be a string, got "
                         f"{type(caption).__name__}")
    return key, lang, caption


def read_predictions(path):
    """Reads and validates a predictions JSONL file.

    Each line is {"image/key": ..., "lang": ..., "caption": ...}.

    Args:
        path: the file.

    Returns:
        `Predictions`: a dict lang -> {image key -> caption}.

    Raises:
        InputError: missing or empty file, a malformed line, an unknown
            language, or a second prediction for one (image, language); the
            message names the file and line.
    """
    if not os.path.exists(path):
        raise InputError(f"predictions file not found: {path}")
    predictions = Predictions(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"{where}: not UTF-8 ({e.reason} at byte {e.start})") from None
            if not line.strip():
                continue
            key, lang, caption = _parse_prediction(line, where)
            if (lang, key) in predictions.lines:
                raise InputError(f"{where}: second prediction for image {key!r} in {lang!r} "
                                 f"(the first is on line {predictions.lines[(lang, key)]})")
            predictions.setdefault(lang, {})[key] = caption
            predictions.lines[(lang, key)] = lineno
    if not predictions:
        raise InputError(f"{path}: no predictions (the file is empty)")
    return predictions


@dataclasses.dataclass(frozen=True)
class LanguageScore:
    """The result for one language.

    Attributes:
        lang: language code.
        score: corpus score (mean over the scored images).
        keys: image keys scored, in reference file order.
        per_image: float64 [len(keys)] scores.
        num_skipped: images with references but no prediction (--allow-missing).
        scorer: the `CiderScorer` (its `document_frequency`, for --save-df).
    """
    lang: str
    score: float
    keys: list
    per_image: np.ndarray
    num_skipped: int
    scorer: CiderScorer


def _where(predictions, lang, key):
    if isinstance(predictions, Predictions):
        return predictions.where(lang, key)
    return "predictions"


def score_languages(records, predictions, langs=None, metric="cider-d", df=None,
                    segmenter="char", reference_field="caption", allow_missing=False,
                    options=text.DEFAULT_OPTIONS):
    """Scores predictions against XM3600 references, language by language.

    Args:
        records: `data.xm3600.read_captions` output.
        predictions: lang -> {image key -> caption} (e.g. `read_predictions`).
        langs: languages to score; default: every language with predictions.
        metric: "cider-d" or "cider".
        df: optional {lang: DocumentFrequency} to use instead of counting over
            each language's references.
        segmenter: "char" or "word" (see `eval.text`).
        reference_field: "caption" or "caption/tokenized".
        allow_missing: score only the images that have a prediction, instead of
            raising when some have none.
        options: other normalization settings.

    Returns:
        {lang: LanguageScore}, in `langs` order.

    Raises:
        InputError: unknown language or image key, images without predictions
            (unless allow_missing), missing document frequencies.
    """
    if reference_field not in REFERENCE_FIELDS:
        raise InputError(f"unknown reference field {reference_field!r}; expected one of "
                         f"{', '.join(REFERENCE_FIELDS)}")
    if langs is None:
        langs = [lang for lang in languages.XM3600_LANGS if predictions.get(lang)]
    try:
        langs = languages.check_langs(langs)
    except ValueError as e:
        raise InputError(str(e)) from None
    known_keys = {record.key for record in records}
    for lang, by_key in predictions.items():
        for key in by_key:
            if key not in known_keys:
                raise InputError(f"{_where(predictions, lang, key)}: prediction for image "
                                 f"{key!r} ({lang!r}), which is not in the references")
    results = {}
    for lang in langs:
        keys, refs = xm3600.references(records, lang, reference_field)
        by_key = predictions.get(lang, {})
        if not keys:
            raise InputError(f"no {lang!r} references (field {reference_field!r})")
        if not by_key:
            raise InputError(f"no predictions for {lang!r}")
        index = {key: i for i, key in enumerate(keys)}
        for key in by_key:
            if key not in index:
                raise InputError(f"{_where(predictions, lang, key)}: prediction for image "
                                 f"{key!r} in {lang!r}, which has no {lang!r} references")
        covered = [i for i, key in enumerate(keys) if key in by_key]
        num_skipped = len(keys) - len(covered)
        if num_skipped and not allow_missing:
            missing = [key for key in keys if key not in by_key]
            raise InputError(
                f"{num_skipped} of {len(keys)} images with {lang!r} references have no "
                f"prediction (first: {', '.join(map(repr, missing[:3]))}); pass "
                f"--allow-missing to score only the images that have one")
        lang_df = None
        if df is not None:
            if lang not in df:
                raise InputError(f"no document frequencies for {lang!r} (they cover "
                                 f"{', '.join(df) or 'nothing'})")
            lang_df = df[lang]
        scorer = CiderScorer(refs, lang, metric, df=lang_df, segmenter=segmenter,
                             options=options)
        result = scorer.score([by_key[keys[i]] for i in covered],
                              indices=covered if num_skipped else None)
        results[lang] = LanguageScore(lang, result.corpus, [keys[i] for i in covered],
                                      result.per_image, num_skipped, scorer)
    return results


def _format_table(results, metric):
    name = {"cider-d": "CIDEr-D", "cider": "CIDEr"}[metric]
    lines = [f"{'lang':<6}{'images':>8}{name:>10}"]
    for r in results.values():
        lines.append(f"{r.lang:<6}{len(r.keys):>8}{r.score:>10.4f}")
    average = float(np.mean([r.score for r in results.values()]))
    lines.append(f"{'average':<6}{'':>8}{average:>10.4f}   ({len(results)} languages; "
                 f"pycocoevalcap scale, x100 in PaLI papers)")
    return "\n".join(lines)


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m eval.cider",
        description="CIDEr-D / CIDEr of predictions against XM3600 references, per language.")
    parser.add_argument("--references", required=True,
                        help="XM3600 captions.jsonl (release layout)")
    parser.add_argument("--predictions", required=True,
                        help='JSONL, one {"image/key": ..., "lang": ..., "caption": ...} per line')
    parser.add_argument("--langs", help="comma-separated languages (default: all predicted)")
    parser.add_argument("--metric", choices=METRICS, default="cider-d")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--per-image", metavar="OUT.jsonl",
                        help='write {"image/key", "lang", "score"} lines')
    parser.add_argument("--df", metavar="FILE", help="document frequencies to use")
    parser.add_argument("--save-df", metavar="FILE",
                        help="write the document frequencies used (one file, all languages)")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score only images that have a prediction")
    parser.add_argument("--segmenter", choices=text.SEGMENTERS, default="char",
                        help="ja/th/zh: characters (default) or words (needs jieba, "
                             "fugashi+unidic-lite, pythainlp)")
    parser.add_argument("--reference-field", choices=REFERENCE_FIELDS, default="caption")
    return parser


def main(argv=None):
    """Runs the CLI; returns the exit status (2 for bad input)."""
    args = _parser().parse_args(argv)
    try:
        records = xm3600.read_captions(args.references)
        predictions = read_predictions(args.predictions)
        df = load_document_frequencies(args.df) if args.df else None
        results = score_languages(
            records, predictions, langs=args.langs, metric=args.metric, df=df,
            segmenter=args.segmenter, reference_field=args.reference_field,
            allow_missing=args.allow_missing)
        for r in results.values():
            if r.num_skipped:
                print(f"{r.lang}: scored {len(r.keys)} of {len(r.keys) + r.num_skipped} "
                      f"images; skipped {r.num_skipped} without a prediction", file=sys.stderr)
        if args.per_image:
            with open(args.per_image, "w", encoding="utf-8") as f:
                for r in results.values():
                    for key, score in zip(r.keys, r.per_image.tolist(), strict=True):
                        f.write(json.dumps({"image/key": key, "lang": r.lang, "score": score},
                                           ensure_ascii=False) + "\n")
        if args.save_df:
            save_document_frequencies(args.save_df,
                                      [r.scorer.document_frequency for r in results.values()])
    except (InputError, xm3600.FormatError, text.NormalizationError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({
            "metric": args.metric,
            "scores": {r.lang: r.score for r in results.values()},
            "average": float(np.mean([r.score for r in results.values()])),
            "num_images": {r.lang: len(r.keys) for r in results.values()},
        }, ensure_ascii=False))
    else:
        print(_format_table(results, args.metric))
    return 0


if __name__ == "__main__":
    sys.exit(main())
