"""Which example each position of the training stream is: a pure function of (seed, position).

Position g (= step * B + i) maps directly to (language, example, reference draw), so a resumed
run sees the uninterrupted run's examples. Every block of K positions holds each of the K
languages once; within a language's epoch each image appears once, with one reference drawn
for that (image, epoch) (`reference_index` turns the draw into an index).
"""

import functools

import numpy as np

from data import languages

# Stream tags that keep the random draws of different purposes independent.
_LANG_ORDER, _EXAMPLE_ORDER, _REFERENCE = range(3)
_BITS = np.random.PCG64(0)  # Set to a stream's state to read one of its draws.


@functools.lru_cache(maxsize=4)
def _language_order(seed, block, num_langs):
    return np.random.default_rng([seed, _LANG_ORDER, block]).permutation(num_langs)


# Two epochs of every language fit: a run of steps can cross an epoch's end.
@functools.lru_cache(maxsize=2 * len(languages.TRAIN_35L_LANGS) + 2)
def _epoch(seed, lang, epoch, size):
    """(permutation of range(size), start of the draws' stream) of a language's epoch."""
    order = np.random.default_rng([seed, _EXAMPLE_ORDER, lang, epoch]).permutation(size)
    return order.astype(np.int32), np.random.PCG64([seed, _REFERENCE, lang, epoch]).state


def _draw(stream, index):
    """Draw `index` of a stream, `default_rng(seeds).random(n)[index]`, without drawing the others
    (PCG64 advances one step per float64)."""
    _BITS.state = stream
    _BITS.advance(index)
    return float(np.random.Generator(_BITS).random())


class Sampler:
    """Maps global positions to (language, example, reference draw); `num_examples` per language."""

    def __init__(self, num_examples, seed):
        self.num_examples = [int(n) for n in num_examples]
        if empty := [i for i, n in enumerate(self.num_examples) if n == 0]:
            raise ValueError(f"languages at positions {empty} have no training examples")
        self.seed = int(seed)

    def example(self, position):
        """(language index, example index within the language, reference draw in [0, 1))."""
        block, slot = divmod(int(position), len(self.num_examples))
        lang = int(_language_order(self.seed, block, len(self.num_examples))[slot])
        # Language `lang`'s n-th draw happens in block n.
        epoch, within = divmod(block, self.num_examples[lang])
        order, draws = _epoch(self.seed, lang, epoch, self.num_examples[lang])
        example = int(order[within])
        return lang, example, _draw(draws, example)


def reference_index(draw, num_refs):
    """The reference a draw in [0, 1) picks among `num_refs` >= 1 (uniformly; a built caption
    record has at least one caption: caption_tables.write_caption_table)."""
    return min(int(draw * num_refs), num_refs - 1)


def local_batch_size(global_batch_size, process_index, process_count):
    """This process's share of every global batch; checks the arguments."""
    if global_batch_size % process_count:
        raise ValueError(f"global_batch_size {global_batch_size} is not divisible by "
                         f"process_count {process_count}")
    if not 0 <= process_index < process_count:
        raise ValueError(f"process_index {process_index} not in [0, {process_count})")
    return global_batch_size // process_count
