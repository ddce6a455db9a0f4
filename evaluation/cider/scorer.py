"""CIDEr-D and CIDEr for multilingual captioning, with a jit-compiled JAX kernel.

CIDEr-D (the default) is exactly pycocoevalcap's `Cider` (vrama91/cider's `CiderD`), including
its quirk of taking the bigram count as a caption's length; CIDEr (`metric="cider"`) is
Vedantam et al.'s formula on the same x10 scale. References are indexed once with numpy
(`ngram_index`); a call matches the predictions' n-grams in one numba loop (`ngram_match`)
and the JAX kernel (`kernel`) turns the sums into scores in float64.
"""

import concurrent.futures
import dataclasses
import math
import os
import warnings

import jax
import numpy as np

from errors import InputError
from evaluation.cider import kernel, ngram_index, ngram_match, text
from evaluation.cider.df import MAX_N, DocumentFrequency

METRICS = ("cider-d", "cider")
SIGMA = kernel.SIGMA


def num_cores():
    """CPU cores this process may use."""
    if hasattr(os, "sched_getaffinity"):  # Linux
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def map_languages(fn, items, costs=None):
    """[fn(item) for item in items] on one thread per core, in order; the first error is raised.
    `costs` (estimated times) start the costliest first."""
    items = list(items)
    workers = min(len(items), num_cores())
    if workers <= 1:
        return [fn(item) for item in items]
    order = range(len(items)) if costs is None else sorted(range(len(items)),
                                                           key=lambda i: -costs[i])
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {i: pool.submit(fn, items[i]) for i in order}
        return [futures[i].result() for i in range(len(items))]


@dataclasses.dataclass(frozen=True)
class CiderResult:
    """Scores of one call: `corpus` (mean) and float64 `per_image` (num_images or len(indices))."""
    corpus: float
    per_image: np.ndarray


class _Tables:
    """Per order: each token position's sequence, tokens per sequence, number of references."""

    def __init__(self, sequence, lengths, num_refs):
        self.sequence, self.lengths, self.num_refs = sequence, lengths, num_refs
        self.known_keys, self.known_first, self.doc_freq, self.idf = [], [], [], []
        self.union_keys, self.union_image, self.union_known, self.entries = [], [], [], []
        self.num_known = self.num_union = 0

    def document_frequency(self, n, df, at, known, order_union_known):
        """int64 document frequency of each known n-gram of order `n`: over the images' distinct
        reference n-grams, or the given `df`'s."""
        if df is None:
            return np.bincount(order_union_known, minlength=known.first.size)
        # Each df n-gram is a sequence of its own, whose n-gram of order
        # len(sequence) starts at its first token.
        doc_freq = np.zeros(known.first.size, dtype=np.int64)
        sequence = self.sequence[at]
        whole = np.flatnonzero((sequence >= self.num_refs) & (self.lengths[sequence] == n))
        counts = np.fromiter(df.counts.values(), np.int64, count=len(df.counts))
        doc_freq[known.group[whole]] = counts[self.sequence[at[whole]] - self.num_refs]
        return doc_freq


class CiderScorer:
    """Scores predictions against fixed references of one language (indexed once, here).
    `references`: per image its reference strings; `df`: a `DocumentFrequency` instead of
    counting over them; `segmenter` and `options`: see `text`."""

    def __init__(self, references, lang, metric="cider-d", df=None, segmenter="char",
                 options=text.DEFAULT_OPTIONS):
        if metric not in METRICS:
            raise InputError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")
        self.lang, self.metric, self.segmenter, self.options = lang, metric, segmenter, options
        self.normalization = options.describe(segmenter)
        if isinstance(references, str | dict):
            raise InputError(f"references must be a list (per image) of lists of strings, "
                             f"not a {type(references).__name__}")
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
            # Tokens as spans of the normalized text, grouped without making a string per token.
            spans = text.normalize_spans(flat, lang, segmenter, options)
        except text.NormalizationError:
            for i, refs in enumerate(references):
                if not all(isinstance(r, str) for r in refs):
                    raise InputError(f"image {i}: references must be strings, got "
                                     f"{refs!r}") from None
            raise
        self._ref_lengths = spans.lengths
        self._ref_token = lambda p: spans.text[int(spans.starts[p]):int(spans.ends[p])]
        self._prepare(df, *ngram_index.distinct_tokens(spans))

    def _prepare(self, df, ref_vocab, ref_ids):
        """Indexes the reference n-grams order by order, from their token ids `ref_ids`."""
        ids, lengths = self._token_ids(df, ref_vocab, ref_ids)
        sequence, remaining = ngram_index.positions(lengths)
        self._log_n = math.log(float(df.num_images if df is not None else self.num_images))
        tables = _Tables(sequence, lengths, num_refs=self._ref_lengths.size)
        # Positions where an n-gram starts, reference tokens first; the key
        # prefix of the (n-1)-grams there, starting with the empty 0-grams:
        # 0 (known), the image (union), the reference (entry).
        at, ref_end = np.arange(ids.size), int(self._ref_lengths.sum())
        prefixes = (np.zeros(ids.size, dtype=np.int64), self._ref_image[sequence[:ref_end]],
                    sequence[:ref_end])
        for n in range(1, MAX_N + 1):
            if n > 1:
                keep = np.flatnonzero(remaining[at] >= n)
                ref_keep = keep[:np.searchsorted(keep, ref_end)]
                at, ref_end = at[keep], ref_keep.size
                prefixes = (prefixes[0][keep], prefixes[1][ref_keep], prefixes[2][ref_keep])
            prefixes = self._index_order(n, ids[at + n - 1], at, ref_end, prefixes, df, tables)
        self._known_first, self._doc_freq = tables.known_first, tables.doc_freq
        self._finish(tables)

    def _token_ids(self, df, ref_vocab, ref_ids):
        """(token ids of the references then of each df n-gram, tokens per such sequence)."""
        df_ngrams = [ngram.split(" ") for ngram in df.counts] if df is not None else []
        df_tokens = [t for ngram in df_ngrams for t in ngram]
        self._vocab = ngram_index.Vocabulary(list(dict.fromkeys(ref_vocab + df_tokens)))
        self._token_bits = len(self._vocab).bit_length()
        ids = np.concatenate([ref_ids, np.fromiter(map(self._vocab.index.__getitem__, df_tokens),
                                                   np.int64, count=len(df_tokens))])
        lengths = np.concatenate([self._ref_lengths,
                                  np.array([len(g) for g in df_ngrams], dtype=np.int64)])
        return ids, lengths

    def _index_order(self, n, token, at, ref_end, prefixes, df, tables):
        """Indexes the n-grams of order `n` into `tables`; returns the next order's prefixes."""
        bits = self._token_bits
        prev_known, prev_union, prev_entry = prefixes
        # Global ids of the n-grams of the references and of the df file,
        # numbered by first occurrence. Token ids are too, so the id of a
        # unigram is its token id - 1 (which `evaluation.cider.ngram_match` relies on).
        keys = ngram_index.shift_key(prev_known, token, bits)
        known = ngram_index.group_keys(keys)
        if n == 1 and not np.array_equal(keys[known.first], np.arange(1, len(self._vocab) + 1)):
            raise AssertionError("unigram ids are not token ids - 1")
        tables.known_keys.append(keys[known.first])
        tables.known_first.append(at[known.first])

        # Per image, its distinct reference n-grams: the union entries.
        ref_at, ref_token = at[:ref_end], token[:ref_end]
        keys = ngram_index.shift_key(prev_union, ref_token, bits)
        union = ngram_index.group_keys(keys)
        tables.union_keys.append(keys[union.first])
        tables.union_image.append(self._ref_image[tables.sequence[ref_at[union.first]]])
        order_union_known = known.group[:ref_end][union.first]
        tables.union_known.append(tables.num_known + order_union_known)

        doc_freq = tables.document_frequency(n, df, at, known, order_union_known)
        tables.doc_freq.append(doc_freq)
        idf = self._log_n - np.log(np.maximum(1.0, doc_freq))
        tables.idf.append(idf)

        # Per reference, its distinct n-grams and their counts ("entries"), sorted by union entry.
        # They come image by image, and so do the union ids, in runs a stable sort (timsort) merges
        # 3x faster than an unstable sort of (id, position) packed into one int64.
        entry = ngram_index.group_keys(ngram_index.shift_key(prev_entry, ref_token, bits))
        entry_union = union.group[entry.first]
        by_union = np.argsort(entry_union, kind="stable")
        entry_idf = idf[order_union_known[entry_union[by_union]]]
        tables.entries.append((tables.sequence[ref_at[entry.first]][by_union] * MAX_N + (n - 1),
                               entry.count[by_union], entry_idf,
                               np.bincount(entry_union, minlength=union.first.size)))

        prefixes = (1 + tables.num_known + known.group,
                    self.num_images + tables.num_union + union.group, entry.group)
        tables.num_known += known.first.size
        tables.num_union += union.first.size
        return prefixes

    def _finish(self, tables):
        """The lookup tables of `ngram_match` and the kernel's reference arrays, from the pieces."""
        num_refs = tables.num_refs
        self._union = ngram_index.KeyTable(np.concatenate(tables.union_keys),
                                           region=np.concatenate(tables.union_image),
                                           num_regions=self.num_images)
        self._known = ngram_index.KeyTable(np.concatenate(tables.known_keys))
        self._union_known = np.concatenate(tables.union_known)
        self._idf2 = np.append(np.concatenate(tables.idf), self._log_n) ** 2
        self._union_idf2 = self._idf2[self._union_known]
        segments, entry_tf, entry_idf, column_sizes = (
            np.concatenate(a) for a in zip(*tables.entries, strict=True))
        self._entry_segment, self._entry_tf = segments, entry_tf
        self._entry_weight = entry_tf * entry_idf ** 2
        self._column_start = np.concatenate([[0], np.cumsum(column_sizes)])
        ref_norm = np.sqrt(np.bincount(segments, weights=(entry_tf * entry_idf) ** 2,
                                       minlength=num_refs * MAX_N))
        ref_len = np.maximum(0, self._ref_lengths - 1).astype(np.float64)
        self._num_refs_pad = num_refs_pad = kernel.size_class(num_refs)
        self._num_images_pad = num_images_pad = kernel.size_class(self.num_images)
        arrays = kernel.RefArrays(
            ref_norm=kernel.pad(ref_norm.reshape(num_refs, MAX_N), num_refs_pad, 0.0),
            ref_len=kernel.pad(ref_len, num_refs_pad, 0.0),
            # Padding references score 0; the last image can absorb them.
            ref_image=kernel.pad(self._ref_image, num_refs_pad,
                                 num_images_pad - 1).astype(np.int32),
            ref_count=kernel.pad(np.bincount(self._ref_image).astype(np.float64),
                                 num_images_pad, 1.0))
        # float64 in the kernel: float32 sums of idf^2 terms (up to ~70 each) lose about 1e-6
        # relative, which is the agreement promised. device_put copies the arrays as they are;
        # jnp.asarray would compile a conversion per shape (0.1 s in a process's first scorer).
        with jax.enable_x64(True):
            self._refs = jax.device_put(arrays)

    @property
    def document_frequency(self):
        """int64 document frequency of each known n-gram of order `n`."""
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
        """The kernel's padded per-call inputs (dot [C * 4], hyp_norm2 [I * 4], hyp_len [I])."""
        dot = np.zeros(self._num_refs_pad * MAX_N)
        hyp_norm2 = np.zeros(self._num_images_pad * MAX_N)
        union, known = self._union, self._known
        ngram_match.prediction_statistics(
            ids, np.concatenate([[0], np.cumsum(lengths)]), image, len(self._vocab),
            self._token_bits, self.num_images, union.keys, union.ids, union.offset, union.size,
            known.keys, known.ids, known.size[0], self._union_known, self._idf2,
            self._union_idf2, self._column_start, self._entry_segment, self._entry_weight,
            self._entry_tf, self.metric == "cider-d", np.zeros((5, ids.size), dtype=np.int64),
            np.full(max_id + 1, -1, dtype=np.int64), dot, hyp_norm2)
        hyp_len = np.zeros(self._num_images_pad, dtype=np.int32)
        hyp_len[image] = np.maximum(0, lengths - 1)
        return dot, hyp_norm2, hyp_len

    def score(self, predictions, indices=None):
        """A `CiderResult` of one predicted caption per image (or per distinct `indices`)."""
        if isinstance(predictions, str | dict):
            raise InputError(f"predictions must be a list of strings, one per image, not a "
                             f"{type(predictions).__name__}")
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
        ids, max_id = self._vocab.span_ids(spans)
        inputs = self._hyp_statistics(ids, max_id, spans.lengths, image)
        with jax.enable_x64(True):
            per_image = np.asarray(kernel.kernel(self._refs, *inputs,
                                                 clipped=self.metric == "cider-d"))[image]
        return CiderResult(float(per_image.mean()), per_image)

