"""Deterministic, resumable order of training examples.

The training stream is a function of (seed, global example position): position
g (= step * global_batch_size + i) maps to a (language, example, reference)
triple computed directly, without drawing the positions before it. Resuming at
step k therefore sees exactly the examples of an uninterrupted run, and
processes can take disjoint slices of the same global batch.

Mixtures:
- "uniform": every block of K consecutive positions (K = number of languages)
  holds each language once, in a random order; so language L's n-th example
  is at block n, and each language walks through its own epochs of images.
- "proportional": all (language, image) pairs form one pool, shuffled per
  epoch; languages appear in proportion to their number of images.

Within an epoch each image appears once, with one reference drawn at random
for that (image, epoch): "one random reference per image per epoch". The draw
is a uniform number u in [0, 1) turned into an index only once the example's
references are read (`reference_index`), so the sampler needs no caption counts
and a reader can fetch examples lazily.
"""

import collections

import numpy as np

MIXTURES = ("uniform", "proportional")
# Stream tags that keep the random draws of different purposes independent.
_LANG_ORDER, _EXAMPLE_ORDER, _REFERENCE, _POOL_ORDER, _POOL_REFERENCE = range(5)


class Sampler:
    """Maps global positions to (language index, example index, reference draw).

    Args:
        num_examples: number of examples (images) per language, in language order.
        mixture: one of MIXTURES.
        seed: int seed.
    """

    def __init__(self, num_examples, mixture, seed):
        if mixture not in MIXTURES:
            raise ValueError(f"unknown mixture {mixture!r}; known: {', '.join(MIXTURES)}")
        self.num_examples = [int(n) for n in num_examples]
        empty = [i for i, n in enumerate(self.num_examples) if n == 0]
        if empty:
            raise ValueError(f"languages at positions {empty} have no training examples")
        self.mixture = mixture
        self.seed = int(seed)
        self._offsets = np.cumsum([0] + self.num_examples)  # [num_langs + 1]
        self._cache = collections.OrderedDict()

    def _cached(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
            if len(self._cache) > 16:
                self._cache.popitem(last=False)
        return self._cache[key]

    def _rng(self, *tags):
        return np.random.default_rng([self.seed, *tags])

    def _lang_epoch(self, lang, epoch):
        """(permutation of examples, reference draw per example) of one language epoch."""
        def make():
            n = self.num_examples[lang]
            order = self._rng(_EXAMPLE_ORDER, lang, epoch).permutation(n)
            return order, self._rng(_REFERENCE, lang, epoch).random(n)
        return self._cached(("lang", lang, epoch), make)

    def _pool_epoch(self, epoch):
        def make():
            total = int(self._offsets[-1])
            order = self._rng(_POOL_ORDER, epoch).permutation(total)
            return order, self._rng(_POOL_REFERENCE, epoch).random(total)
        return self._cached(("pool", epoch), make)

    def _uniform(self, positions):
        num_langs = len(self.num_examples)
        blocks = positions // num_langs
        langs = np.empty_like(positions)
        for block in np.unique(blocks):
            order = self._rng(_LANG_ORDER, int(block)).permutation(num_langs)
            mask = blocks == block
            langs[mask] = order[positions[mask] % num_langs]
        examples, refs = np.empty_like(positions), np.empty(positions.shape)
        for lang in range(num_langs):
            mask = langs == lang
            # Language `lang`'s n-th draw happens in block n.
            n = blocks[mask]
            epochs, within = np.divmod(n, self.num_examples[lang])
            for epoch in np.unique(epochs):
                order, ref = self._lang_epoch(lang, int(epoch))
                sel = epochs == epoch
                picked = order[within[sel]]
                idx = np.flatnonzero(mask)[sel]
                examples[idx] = picked
                refs[idx] = ref[picked]
        return langs, examples, refs

    def _proportional(self, positions):
        total = int(self._offsets[-1])
        epochs, within = np.divmod(positions, total)
        flat, refs = np.empty_like(positions), np.empty(positions.shape)
        for epoch in np.unique(epochs):
            order, ref = self._pool_epoch(int(epoch))
            sel = epochs == epoch
            flat[sel] = order[within[sel]]
            refs[sel] = ref[flat[sel]]
        langs = np.searchsorted(self._offsets, flat, side="right") - 1
        return langs, flat - self._offsets[langs], refs

    def sample(self, start, count):
        """The examples at global positions [start, start + count).

        Returns:
            (langs, examples, draws): int64 arrays [count] of language index and
            example index within the language, and float64 [count] reference
            draws in [0, 1) for `reference_index`.
        """
        positions = np.arange(start, start + count, dtype=np.int64)
        if self.mixture == "uniform":
            return self._uniform(positions)
        return self._proportional(positions)


def reference_index(draw, num_refs):
    """The reference a draw in [0, 1) picks among `num_refs` (uniformly)."""
    if num_refs < 1:
        raise ValueError("an example has no references")
    return min(int(draw * num_refs), num_refs - 1)


def process_slice(step, global_batch_size, process_index, process_count):
    """(start, count) of this process's share of global batch `step`.

    Processes take consecutive, disjoint slices that together cover the batch.
    """
    if global_batch_size % process_count:
        raise ValueError(f"global_batch_size {global_batch_size} is not divisible by "
                         f"process_count {process_count}")
    if not 0 <= process_index < process_count:
        raise ValueError(f"process_index {process_index} not in [0, {process_count})")
    local = global_batch_size // process_count
    return step * global_batch_size + process_index * local, local
