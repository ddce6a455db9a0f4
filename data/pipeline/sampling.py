"""Which example each position of the training stream is: a pure function of (seed, position).

Position g (= step * global_batch_size + i) maps to a (language, example, reference draw)
triple computed directly, without drawing the positions before it, so a run resumed at
step k sees exactly the examples of an uninterrupted run, and processes take disjoint,
consecutive slices of the same global batch (process p of P: b = B / P positions from
step * B + p * b).

Mixtures:
- "uniform": every block of K consecutive positions (K = number of languages) holds each
  language once, in a random order; so language L's n-th example is at block n, and each
  language walks through its own epochs of images.
- "proportional": all (language, image) pairs form one pool, shuffled per epoch;
  languages appear in proportion to their number of images.

Within an epoch each image appears once, with one reference drawn at random for that
(image, epoch): "one random reference per image per epoch". The draw is a uniform number
u in [0, 1) turned into an index only once the example's references are read
(`reference_index`), so the sampler needs no caption counts. An epoch's order is a
permutation kept in memory (4 bytes an image; the current epochs of every language); its
draws are not kept: the i-th draw of an epoch's stream is read by advancing the generator.
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
        self._epochs = collections.OrderedDict()  # Cached epochs, least recent first.
        self._block = (None, None)  # The last uniform block and its language order.
        self._bits = np.random.PCG64(0)  # Set to a stream's state to read one of its draws.

    def __getstate__(self):  # Worker processes make their own epochs.
        return {**self.__dict__, "_epochs": collections.OrderedDict()}

    def _seeds(self, *tags):
        return np.random.SeedSequence([self.seed, *tags])

    def _epoch(self, order_tags, draw_tags, size):
        """(permutation of range(size), start of the draws' stream) of one epoch."""
        if order_tags not in self._epochs:
            # Two epochs of every language fit: a run of steps can cross an epoch's end.
            if len(self._epochs) >= 2 * len(self.num_examples) + 2:
                self._epochs.popitem(last=False)
            order = np.random.default_rng(self._seeds(*order_tags)).permutation(size)
            draws = np.random.PCG64(self._seeds(*draw_tags)).state
            self._epochs[order_tags] = order.astype(np.int32), draws
        self._epochs.move_to_end(order_tags)
        return self._epochs[order_tags]

    def _draw(self, stream, index):
        """Draw `index` of a stream: `default_rng(its seeds).random(n)[index]`, not drawing
        the others (PCG64 advances one 64-bit step per float64 draw)."""
        self._bits.state = stream
        self._bits.advance(index)
        return float(np.random.Generator(self._bits).random())

    def _language(self, position):
        """The language of a uniform position, and the block (of one per language) it is in."""
        block, slot = divmod(position, len(self.num_examples))
        if self._block[0] != block:
            order = np.random.default_rng(self._seeds(_LANG_ORDER, block))
            self._block = block, order.permutation(len(self.num_examples))
        return int(self._block[1][slot]), block

    def example(self, position):
        """(language index, example index within the language, reference draw in [0, 1))."""
        position = int(position)
        if self.mixture == "uniform":
            lang, block = self._language(position)
            # Language `lang`'s n-th draw happens in block n.
            epoch, within = divmod(block, self.num_examples[lang])
            order, draws = self._epoch((_EXAMPLE_ORDER, lang, epoch), (_REFERENCE, lang, epoch),
                                       self.num_examples[lang])
            example = int(order[within])
            return lang, example, self._draw(draws, example)
        epoch, within = divmod(position, int(self._offsets[-1]))
        order, draws = self._epoch((_POOL_ORDER, epoch), (_POOL_REFERENCE, epoch),
                                   int(self._offsets[-1]))
        flat = int(order[within])
        lang = int(np.searchsorted(self._offsets, flat, side="right")) - 1
        return lang, flat - int(self._offsets[lang]), self._draw(draws, flat)


def reference_index(draw, num_refs):
    """The reference a draw in [0, 1) picks among `num_refs` (uniformly)."""
    if num_refs < 1:
        raise ValueError("an example has no references")
    return min(int(draw * num_refs), num_refs - 1)


def local_batch_size(global_batch_size, process_index, process_count):
    """This process's share of every global batch; checks the arguments."""
    if global_batch_size % process_count:
        raise ValueError(f"global_batch_size {global_batch_size} is not divisible by "
                         f"process_count {process_count}")
    if not 0 <= process_index < process_count:
        raise ValueError(f"process_index {process_index} not in [0, {process_count})")
    return global_batch_size // process_count
