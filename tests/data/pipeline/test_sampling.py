"""Tests of data/pipeline/sampling.py: language blocks, epochs, draws, resumption, sharding."""

import collections

import numpy as np
import pytest

from data.pipeline import sampling

NUM_EXAMPLES = [5, 3, 8]
NUM_REFS = [[2] * 5, [1, 3, 2], [5] * 8]


def _sampler(seed=0):
    return sampling.Sampler(NUM_EXAMPLES, seed)


def _sample(sampler, start, count):
    """(languages, examples, draws) of positions [start, start + count), as arrays."""
    langs, examples, draws = zip(*(sampler.example(g) for g in range(start, start + count)),
                                 strict=True)
    return np.array(langs), np.array(examples), np.array(draws)


def _refs(langs, examples, draws):
    return np.array([sampling.reference_index(d, NUM_REFS[l][e])
                     for l, e, d in zip(langs, examples, draws, strict=True)])


def test_uniform_blocks_hold_each_language_once():
    langs, _, _ = _sample(_sampler(), 0, 3 * 8 * 5)
    for block in langs.reshape(40, 3):
        assert sorted(block) == [0, 1, 2]


def test_epochs_hold_each_example_once():
    langs, examples, _ = _sample(_sampler(), 0, 3 * 8 * 5)
    for lang, n in enumerate(NUM_EXAMPLES):
        seen = examples[langs == lang]
        for epoch in range(len(seen) // n):
            assert sorted(seen[epoch * n:(epoch + 1) * n]) == list(range(n))


def test_chosen_references_are_the_examples_own():
    langs, examples, draws = _sample(_sampler(), 0, 3 * 8 * 5)
    refs = _refs(langs, examples, draws)
    for lang in range(len(NUM_EXAMPLES)):
        seen = examples[langs == lang]
        chosen_refs = refs[langs == lang]
        assert all(0 <= r < NUM_REFS[lang][e] for e, r in zip(seen, chosen_refs, strict=True))


def test_references_vary_across_epochs():
    # Language 2 has 5 references per image: over 20 epochs every reference shows up.
    langs, examples, draws = _sample(_sampler(), 0, 3 * 8 * 20)
    refs = _refs(langs, examples, draws)
    chosen = collections.defaultdict(set)
    for l, e, r in zip(langs, examples, refs, strict=True):
        if l == 2:
            chosen[e].add(r)
    assert all(len(c) >= 4 for c in chosen.values())


def test_any_window_equals_the_same_positions_of_a_long_run_of_its_seed():
    full = _sample(_sampler(), 0, 200)
    for start, count in ((150, 50), (0, 7), (37, 50)):
        sampling._epoch.cache_clear()  # As in a new process: nothing cached.
        sampling._language_order.cache_clear()
        window = _sample(_sampler(), start, count)
        for a, b in zip(full, window, strict=True):
            np.testing.assert_array_equal(a[start:start + count], b)
    assert not np.array_equal(full[1][:16], _sample(_sampler(seed=1), 0, 16)[1])  # seed


def test_bad_arguments_are_rejected():
    assert sampling.local_batch_size(12, 2, 3) == 4
    with pytest.raises(ValueError, match="not divisible"):
        sampling.local_batch_size(10, 0, 3)
    with pytest.raises(ValueError, match="process_index"):
        sampling.local_batch_size(12, 3, 3)
    with pytest.raises(ValueError, match="no training examples"):
        sampling.Sampler([2, 0], 0)


def test_reference_index_is_uniform():
    draws = np.random.default_rng(0).random(6000)
    picks = [sampling.reference_index(d, 3) for d in draws]
    assert np.bincount(picks).tolist() == pytest.approx([2000] * 3, abs=150)


def test_reference_index_of_a_draw_near_one_is_in_range():
    assert sampling.reference_index(0.999999999, 5) == 4


def test_a_draw_is_the_epoch_streams_draw_of_its_example():
    """The draws are read by advancing the generator: the numbers of drawing them all."""
    sampler = _sampler(seed=3)
    for position in range(0, 3 * sum(NUM_EXAMPLES), 5):
        lang, example, draw = sampler.example(position)
        epoch = (position // len(NUM_EXAMPLES)) // NUM_EXAMPLES[lang]
        stream = np.random.default_rng([3, 2, lang, epoch])
        assert draw == stream.random(NUM_EXAMPLES[lang])[example]
