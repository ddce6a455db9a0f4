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
exact and come order by order (`eval.ngram_index`). References are prepared
once: global n-gram ids (for document frequencies), per image its distinct
reference n-grams ("union entries") and per reference its distinct n-grams
with counts ("entries"), and a sparse matrix (entries x union entries) of
tf_r idf^2. A call looks the prediction's n-grams up order by order in static
numpy hash tables, one region per image (an n-gram is skipped when its prefix
or suffix already missed), and counts them (a bincount over union entries; a
sort of packed keys for the others). |h|^2 is a sum over positions of tf idf^2;
the dot products are one sparse matrix-vector product with the prediction's
union entries (taking min(tf_h, tf_r) = 1), plus a correction over the entries
the prediction repeats. Document frequency files live in `eval.cider_df`, the
command line in `eval.cider_cli`; this module re-exports both.
The jit-compiled kernel (`eval.cider_kernel`) turns those per-(reference, n)
sums and per-(image, n) norms into cosines, length penalties and per-image
means, in float64. Its arrays are padded to powers of two of at least 2^14, so
one compilation serves every XM3600 language.

Why the n-gram matching is numpy and not XLA: it is hash lookups, sorts and
bincounts over ragged data; on CPU, XLA's gathers are no faster than numpy's,
its sort is ~7x slower, and per-call shapes would mean recompilations.
"""

import dataclasses
import math
import sys
import typing
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from eval import cider_kernel, ngram_index, text
from eval.cider_df import (  # noqa: F401 (API)
    MAX_N,
    DocumentFrequency,
    InputError,
    load_document_frequencies,
    save_document_frequencies,
)

METRICS = ("cider-d", "cider")
SIGMA = cider_kernel.SIGMA
# The command line's names, importable from here too (loaded on first use,
# since eval.cider_cli itself imports this module).
_CLI_NAMES = ("LanguageScore", "Predictions", "REFERENCE_FIELDS", "main", "read_predictions",
              "score_languages")


def __getattr__(name):
    if name in _CLI_NAMES:
        from eval import cider_cli
        return getattr(cider_cli, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _distinct(values):
    """Sorted distinct values (np.unique, which is many times slower on int64 here)."""
    values = np.sort(values)
    return values[np.append(True, values[1:] != values[:-1])] if values.size else values


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
    known: ngram_index.KeyTable  # (known id of prefix, token) -> known id
    idf2: np.ndarray          # [K + 1] idf^2 per known id; the last entry (id -1): (ln N)^2
    union: ngram_index.KeyTable  # (union id of prefix, token), per image -> union id
    union_known: np.ndarray   # [U] known id of each union entry
    union_offset: int         # where this order's union entries start in `_dot_matrix`
    # The entries (reference, n-gram) whose reference holds the n-gram at
    # least twice, sorted by union id: where clipping can matter.
    multi_start: np.ndarray   # [U] first such entry of each union entry
    multi_count: np.ndarray   # [U] how many it has
    multi_tf: np.ndarray      # [M] count in the reference
    multi_weight: np.ndarray  # [M] that count times idf^2
    multi_segment: np.ndarray  # [M] reference * 4 + (n - 1)


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
            distinct = ngram_index.distinct_tokens(spans) if spans is not None else None
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
        self._vocab = ngram_index.Vocabulary(list(dict.fromkeys(ref_vocab + df_tokens)))
        self._token_bits = len(self._vocab).bit_length()
        if ref_ids is None:
            ref_ids = np.fromiter(map(self._vocab.index.__getitem__, ref_tokens), np.int64,
                                  count=len(ref_tokens))
        ids = np.concatenate([ref_ids, np.fromiter(map(self._vocab.index.__getitem__, df_tokens),
                                                   np.int64, count=len(df_tokens))])
        num_refs = self._ref_lengths.size
        lengths = np.concatenate([self._ref_lengths,
                                  np.array([len(g) for g in df_ngrams], dtype=np.int64)])
        sequence, remaining = ngram_index.positions(lengths)
        num_ref_tokens = int(self._ref_lengths.sum())
        self._log_n = math.log(float(df.num_images if df is not None else self.num_images))
        bits = self._token_bits

        self._tables, self._known_first, self._doc_freq = [], [], []
        ref_segments, dot_column_sizes, num_union = [], [], 0
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
            known_keys = ngram_index.shift_key(prev_known, token, bits)
            # Groups are numbered in key order; every vocabulary token occurs, so
            # the id of a unigram is its token id - 1.
            known = ngram_index.group_keys(known_keys)
            if n == 1 and known.first.size != len(self._vocab):
                raise AssertionError("unigram ids are not token ids")
            known_table = ngram_index.KeyTable(known_keys[known.first])
            num_known = known.first.size
            self._known_first.append(at[known.first])

            # Per image, its distinct reference n-grams: the union entries.
            ref_at, ref_token = at[:ref_end], token[:ref_end]
            union_keys = ngram_index.shift_key(prev_union, ref_token, bits)
            union = ngram_index.group_keys(union_keys)
            union_image = self._ref_image[sequence[ref_at[union.first]]]
            union_table = ngram_index.KeyTable(union_keys[union.first], region=union_image,
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
            entry = ngram_index.group_keys(ngram_index.shift_key(prev_entry, ref_token, bits))
            entry_union = union.group[entry.first]
            by_union = ngram_index.sort_order(entry_union)
            entry_ref = sequence[ref_at[entry.first]]
            entry_tf = entry.count[by_union]
            entry_segment = entry_ref[by_union] * MAX_N + (n - 1)
            entry_idf = idf[union_known[entry_union[by_union]]]
            entry_weight = entry_tf * entry_idf ** 2
            ref_segments.append((entry_segment, (entry_tf * entry_idf) ** 2, entry_weight))
            dot_column_sizes.append(np.bincount(entry_union, minlength=union.first.size))
            multi = np.flatnonzero(entry_tf >= 2)
            multi_count = np.bincount(entry_union[by_union][multi], minlength=union.first.size)

            known_ids, union_ids, entry_ids = known.group, union.group, entry.group
            self._tables.append(_OrderTables(
                known=known_table, idf2=np.append(idf, self._log_n) ** 2, union=union_table,
                union_known=union_known, union_offset=num_union,
                multi_start=np.cumsum(multi_count) - multi_count, multi_count=multi_count,
                multi_tf=entry_tf[multi], multi_weight=entry_weight[multi],
                multi_segment=entry_segment[multi]))
            num_union += union.first.size

        segments = np.concatenate([s for s, _, _ in ref_segments])
        weights = np.concatenate([w for _, w, _ in ref_segments])
        ref_norm = np.sqrt(np.bincount(segments, weights=weights, minlength=num_refs * MAX_N))
        ref_len = np.maximum(0, self._ref_lengths - 1).astype(np.float64)
        num_refs_pad = cider_kernel.size_class(num_refs)
        self._num_images_pad = num_images_pad = cider_kernel.size_class(self.num_images)
        self._num_refs_pad = num_refs_pad
        # dot = _dot_matrix @ x, x over the union entries of all orders: with x
        # the prediction's counts, sum_g tf_h tf_r idf^2 per (reference, n).
        # The entries are already sorted by union entry: they are its columns.
        self._dot_matrix = scipy.sparse.csc_matrix(
            (np.concatenate([w for _, _, w in ref_segments]), segments,
             np.concatenate([[0], np.cumsum(np.concatenate(dot_column_sizes))])),
            shape=(num_refs_pad * MAX_N, num_union))
        arrays = cider_kernel.RefArrays(
            ref_norm=cider_kernel.pad(ref_norm.reshape(num_refs, MAX_N), num_refs_pad, 0.0),
            ref_len=cider_kernel.pad(ref_len, num_refs_pad, 0.0),
            # Padding references score 0; the last image can absorb them.
            ref_image=cider_kernel.pad(self._ref_image, num_refs_pad,
                                       num_images_pad - 1).astype(np.int32),
            ref_count=cider_kernel.pad(np.bincount(self._ref_image).astype(np.float64),
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
        """The kernel's per-call inputs (see `cider_kernel.kernel`), order by order.

        Arrays of order n are aligned with the positions where an n-gram
        starts; those of order n + 1 are a subset, taken by compaction.

        Args:
            ids: int64 [num_tokens] token ids of the predictions.
            max_id: the largest id there can be.
            lengths: int64 [num_predictions] tokens per prediction.
            image: int64 [num_predictions] image of each prediction.

        Returns:
            (dot [C * 4], hyp_norm2 [I * 4], hyp_len [I]), padded.
        """
        caption, remaining = ngram_index.positions(lengths)
        vocab_size, bits, call_bits = len(self._vocab), self._token_bits, max_id.bit_length()
        clipped = self.metric == "cider-d"
        hyp_norm2 = np.zeros(self._num_images_pad * MAX_N)
        dot = np.zeros(self._num_refs_pad * MAX_N)
        # The matrix's operand over the union entries of all orders: the
        # prediction's count of each (CIDEr), or whether it has it (CIDEr-D).
        union_x = np.zeros(self._dot_matrix.shape[1])
        at = np.arange(ids.size)
        at_image = image[caption]
        # State of the (n-1)-grams at `at`, starting with the empty 0-grams, whose
        # "union entry" is the image and whose identity is the caption.
        union, known = at_image, np.zeros(ids.size, dtype=np.int64)
        ident, count = caption, np.full(ids.size, 2)
        # Numbers above every prefix id of the order, for the key packing.
        union_bound, known_bound, ident_bound = self.num_images, vocab_size, lengths.size
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
                ngram_index.shift_key(prev_union[look], token[look], bits, union_bound),
                region=at_image[look])
            inside = np.flatnonzero(union >= 0)
            outside = np.flatnonzero(union < 0)
            inside_union = union[inside]
            # A union entry identifies (image, n-gram): counting is a bincount.
            union_tf = np.bincount(inside_union, minlength=tables.union_known.size)
            inside_tf = union_tf[inside_union]
            if clipped:
                union_x[tables.union_offset + inside_union] = 1.0
                # `_dot_matrix` takes min(tf_h, tf_r) as 1; add the rest where
                # both the prediction and a reference repeat the n-gram.
                repeated = inside_union[inside_tf >= 2]
                repeated = repeated[tables.multi_count[repeated] > 0]
                if repeated.size:
                    dot += self._repeated_dot(tables, union_tf, _distinct(repeated))
            else:
                union_x[tables.union_offset:tables.union_offset + union_tf.size] = union_tf

            # The other n-grams: the df from their global id, if they have one,
            # and their count, by grouping equal (identity of prefix, token) keys
            # of one caption; only those whose prefix repeats can repeat.
            if n == 1:
                outside_known = np.where(token[outside] <= vocab_size, token[outside] - 1, -1)
            else:
                outside_known = np.full(outside.size, -1, dtype=np.int64)
                look = np.flatnonzero((prev_known[outside] >= 0) & (suffix_known[outside] >= 0))
                outside_known[look] = tables.known.find(ngram_index.shift_key(
                    prev_known[outside[look]], token[outside[look]], bits, known_bound))
            outside_tf = np.ones(outside.size, dtype=np.int64)
            may_repeat = prev_count[outside] >= 2
            repeats = outside[may_repeat]
            groups = ngram_index.group_keys(
                ngram_index.shift_key(prev_ident[repeats], token[repeats], call_bits,
                                      ident_bound))
            outside_tf[may_repeat] = groups.count[groups.group]

            # State for order n + 1. Identities: union entries first, then groups.
            count = np.empty(at.size, dtype=np.int64)
            count[inside] = inside_tf
            count[outside] = outside_tf
            ident = np.full(at.size, -1, dtype=np.int64)
            ident[inside] = inside_union
            ident[repeats] = tables.union_known.size + groups.group
            known = np.empty(at.size, dtype=np.int64)
            known[inside] = tables.union_known[inside_union]
            known[outside] = outside_known
            union_bound, known_bound = tables.union_known.size, tables.idf2.size - 1
            ident_bound = tables.union_known.size + repeats.size
            # |h|^2 = sum over distinct n-grams of (tf idf)^2 = sum over positions of tf idf^2.
            hyp_norm2 += np.bincount(at_image * MAX_N + (n - 1),
                                     weights=count * tables.idf2[known], minlength=hyp_norm2.size)
        dot += self._dot_matrix @ union_x
        hyp_len = np.zeros(self._num_images_pad, dtype=np.int32)
        hyp_len[image] = np.maximum(0, lengths - 1)
        return dot, hyp_norm2, hyp_len

    def _repeated_dot(self, tables, union_tf, repeated):
        """(min(tf_h, tf_r) - 1) tf_r idf^2 per (reference, n), over the `repeated` entries.

        Args:
            tables: `_OrderTables` of the order.
            union_tf: int64 [U] the prediction's count of each union entry.
            repeated: int64 [R] distinct union entries it holds at least twice.
        """
        repeat = tables.multi_count[repeated]
        entry = ngram_index.expand(tables.multi_start[repeated], repeat)
        extra = np.minimum(np.repeat(union_tf[repeated], repeat), tables.multi_tf[entry]) - 1
        return np.bincount(tables.multi_segment[entry], weights=extra * tables.multi_weight[entry],
                           minlength=self._num_refs_pad * MAX_N)

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
            per_image = np.asarray(cider_kernel.kernel(self._refs, *inputs,
                                           clipped=self.metric == "cider-d"))
        per_image = per_image[image]
        return CiderResult(float(per_image.mean()), per_image)



if __name__ == "__main__":
    from eval import cider_cli
    sys.exit(cider_cli.main())
