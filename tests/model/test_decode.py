"""Tests of greedy decoding, beam search and sampling.

Two models: the tiny real captioner (cached decoding against uncached full forward passes) and a toy
module whose next-token logits depend on the decoding cache in a known way, so that results can be
checked against exhaustive enumeration."""

import itertools

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from model import captioner, decode, layers

EOS = 1


@pytest.fixture(scope="module")
def tiny():
    """The tiny captioner, inputs, and its argmax path by uncached forward passes."""
    config = ml_collections.ConfigDict(dict(
        vit=dict(variant="mu/8"), t5=dict(variant="t5-tiny"), image_size=32))
    model = captioner.from_config(config)
    params = layers.random_params(captioner.abstract_params(model), seed=3)
    # Drawn by numpy: jax.random would compile a sampler for the shape.
    images = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (3, 32, 32, 3)), jnp.float32)
    prompt = jnp.array([[5, 6, 0], [7, 0, 0], [9, 10, 11]], jnp.int32)
    argmax_path = _uncached_argmax_path(model, params, images, prompt, 6)
    return model, params, images, prompt, argmax_path


def _uncached_argmax_path(model, params, images, prompt, max_len):
    """Argmax over full forward passes on the growing prefix (no cache, no EOS stop)."""
    forward = jax.jit(lambda t: model.apply({"params": params}, images, prompt, t))
    tokens = jnp.zeros((images.shape[0], max_len + 1), jnp.int32)
    for i in range(max_len):
        # Causal decoder: positions after i do not affect position i.
        tokens = tokens.at[:, i + 1].set(jnp.argmax(forward(tokens)[:, i], -1))
    return np.asarray(tokens[:, 1:])


def _cut_after_eos(tokens):
    tokens = np.array(tokens)
    for row in tokens:
        ends = np.flatnonzero(row == EOS)
        if ends.size:
            row[ends[0] + 1:] = 0
    return tokens


def test_greedy_equals_uncached_argmax(tiny):
    model, params, images, prompt, argmax_path = tiny
    got = decode.greedy(model, params, images, prompt, max_len=6)
    assert got.shape == (3, 6) and got.dtype == jnp.int32
    np.testing.assert_array_equal(got, _cut_after_eos(argmax_path))


def test_one_beam_equals_uncached_argmax(tiny):
    model, params, images, prompt, argmax_path = tiny
    # With an unreachable EOS a single beam follows the argmax path through the cache.
    tokens, scores = decode.beam_search(model, params, images, prompt, max_len=6,
                                        beam_size=1, alpha=0.0, eos_id=-1)
    np.testing.assert_array_equal(tokens, argmax_path)
    assert scores.shape == (3,) and np.all(scores < 0)


def test_decoding_accepts_a_params_or_a_variables_dict():
    params = {"img": {"w": 1}, "t5": {"w": 2}}  # a params or a variables dict is accepted
    assert decode._variables(params) == {"params": params}
    assert decode._variables({"params": params, "cache": {}}) == {"params": params}


class ToyModel(nn.Module):
    """Next-token logits = table[step, running sum of fed tokens % 4].

    The running sum lives in the 'cache' collection (one entry per sequence),
    so beam search must reorder it correctly when beams are regrouped."""
    table: tuple  # [max_len, 4, vocab] logits as nested tuples (hashable)

    def encode(self, images, prompt_tokens, train=False):
        batch = images.shape[0]
        return jnp.zeros((batch, 1, 1)), jnp.ones((batch, 1), bool)

    @nn.compact
    def decode(self, encoded, encoder_mask, tokens, decode=False, train=False):
        table = jnp.asarray(self.table, jnp.float32)
        batch, length = tokens.shape
        if not decode:  # Teacher-forced: no cache.
            sums = jnp.cumsum(tokens, axis=1) % 4
            return table[jnp.arange(length)[None, :], sums]
        filled = self.has_variable("cache", "total")
        total = self.variable("cache", "total", jnp.zeros, (batch,), jnp.int32)
        step = self.variable("cache", "step", jnp.zeros, (), jnp.int32)
        if filled:
            total.value = total.value + tokens[:, 0]
            logits = table[step.value, total.value % 4][:, None]
            step.value = step.value + 1
            return logits
        return table[jnp.zeros((batch, length), jnp.int32), 0]  # init_cache's shapes


def _toy(seed, max_len, vocab=4, eos_boost=0.0):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(max_len, 4, vocab)) * 2.0
    table[:, :, EOS] += eos_boost
    return ToyModel(table=tuple(map(lambda a: tuple(map(tuple, a)), table))), table


def _toy_log_prob(table, seq):
    """Log-probability of the tokens `seq` under the toy model."""
    total, log_prob = 0, 0.0
    for step, token in enumerate(seq):
        logits = table[step, total % 4]
        log_prob += logits[token] - np.log(np.sum(np.exp(logits)))
        total += token
    return log_prob


def test_greedy_stops_at_eos_with_padding_after_it():
    model, table = _toy(seed=0, max_len=6, eos_boost=1.5)
    images = jnp.zeros((8, 1, 1, 3))
    tokens = np.asarray(decode.greedy(model, {}, images, jnp.zeros((8, 1), jnp.int32), 6))
    want = np.zeros((8, 6), int)
    total = 0
    seq = []
    for step in range(6):  # every example sees the same table: one greedy path
        token = int(np.argmax(table[step, total % 4]))
        seq.append(token)
        total += token
        if token == EOS:
            break
    want[:, :len(seq)] = seq
    assert seq[-1] == EOS and len(seq) < 6  # this seed ends early
    np.testing.assert_array_equal(tokens, want)


def _best_by_enumeration(table, max_len, alpha, vocab=4):
    """Best EOS-terminated sequence and its T5X score, by trying them all."""
    best, best_score = None, -np.inf
    for length in range(1, max_len + 1):
        for prefix in itertools.product([t for t in range(vocab) if t != EOS], repeat=length - 1):
            seq = list(prefix) + [EOS]
            score = _toy_log_prob(table, seq) / ((5.0 + length) / 6.0) ** alpha
            if score > best_score:
                best, best_score = seq, score
    return best, best_score


@pytest.mark.parametrize("seed, alpha", [(0, 0.0), (1, 0.6), (2, 0.6), (3, 2.0)])
def test_wide_beam_search_finds_the_best_sequence(seed, alpha):
    # 3 non-EOS tokens and 3 steps: 9 beams hold every live prefix, so the
    # search is exhaustive and must return the enumerated optimum.
    model, table = _toy(seed, max_len=3)
    images, prompt = jnp.zeros((2, 1, 1, 3)), jnp.zeros((2, 1), jnp.int32)
    tokens, scores = decode.beam_search(model, {}, images, prompt, max_len=3, beam_size=9,
                                        alpha=alpha)
    seq, score = _best_by_enumeration(table, 3, alpha)
    want = np.zeros(3, int)
    want[:len(seq)] = seq
    for row, row_score in zip(np.asarray(tokens), np.asarray(scores), strict=True):
        np.testing.assert_array_equal(row, want)
        np.testing.assert_allclose(row_score, score, rtol=1e-5)


def test_beam_search_without_eos_returns_best_live_sequence():
    # eos_id outside the vocabulary: nothing ever finishes.
    model, table = _toy(0, max_len=3)
    images, prompt = jnp.zeros((1, 1, 1, 3)), jnp.zeros((1, 1), jnp.int32)
    tokens, scores = decode.beam_search(model, {}, images, prompt, max_len=3, beam_size=16,
                                        eos_id=7)
    candidates = list(itertools.product(range(4), repeat=3))
    log_probs = [_toy_log_prob(table, seq) for seq in candidates]
    np.testing.assert_array_equal(tokens[0], candidates[int(np.argmax(log_probs))])
    np.testing.assert_allclose(scores[0], max(log_probs), rtol=1e-5)  # not length-normalized


def _beam_one_reference(table, max_len, eos_boost_steps=None):
    """T5X beam search with one beam and alpha 0, simulated by hand.

    The live beam follows the best non-EOS token; whenever EOS is among the two best extensions,
    prefix + EOS joins the finished set. The result is the most probable finished sequence (greedy's
    own, if it ends, is one of them), or the live path if none finished."""
    prefix, total, log_prob = [], 0, 0.0
    best, best_score = None, -np.inf
    for step in range(max_len):
        logits = table[step, total % 4]
        log_probs = logits - np.log(np.sum(np.exp(logits)))
        top2 = np.argsort(-log_probs)[:2]
        if EOS in top2 and log_prob + log_probs[EOS] > best_score:
            best, best_score = prefix + [EOS], log_prob + log_probs[EOS]
        token = int(next(t for t in top2 if t != EOS))
        if best is not None and log_prob + log_probs[token] < best_score:
            break  # no live extension can beat the finished one any more
        prefix, total, log_prob = prefix + [token], total + token, log_prob + log_probs[token]
    seq = best if best is not None else prefix
    return np.array(seq + [0] * (max_len - len(seq)))


@pytest.mark.parametrize("seed", [0, 4, 5, 8])
def test_beam_size_one_semantics_on_toy(seed):
    model, table = _toy(seed, max_len=5, eos_boost=1.0)
    images, prompt = jnp.zeros((1, 1, 1, 3)), jnp.zeros((1, 1), jnp.int32)
    tokens, _ = decode.beam_search(model, {}, images, prompt, max_len=5, beam_size=1, alpha=0.0)
    np.testing.assert_array_equal(tokens[0], _beam_one_reference(table, 5))


def test_beam_size_one_equals_greedy_when_eos_is_only_ever_the_argmax():
    model, table = _toy(9, max_len=5, eos_boost=-50.0)
    table[3, :, EOS] = 50.0  # EOS is the argmax at step 3 and never second-best
    model = ToyModel(table=tuple(map(lambda a: tuple(map(tuple, a)), table)))
    images, prompt = jnp.zeros((2, 1, 1, 3)), jnp.zeros((2, 1), jnp.int32)
    greedy = decode.greedy(model, {}, images, prompt, max_len=5)
    tokens, _ = decode.beam_search(model, {}, images, prompt, max_len=5, beam_size=1, alpha=0.0)
    assert int(greedy[0, 3]) == EOS
    np.testing.assert_array_equal(tokens, greedy)


def test_sampling_limits():
    model, _ = _toy(seed=6, max_len=4, eos_boost=0.5)
    images, prompt = jnp.zeros((4, 1, 1, 3)), jnp.zeros((4, 1), jnp.int32)
    greedy = decode.greedy(model, {}, images, prompt, max_len=4)
    rng = jax.random.key(0)
    np.testing.assert_array_equal(
        decode.sample(model, {}, images, prompt, 4, rng, temperature=0.0), greedy)
    np.testing.assert_array_equal(decode.sample(model, {}, images, prompt, 4, rng, top_k=1), greedy)
    with pytest.raises(ValueError, match="temperature"):
        decode.sample(model, {}, images, prompt, 4, rng, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k=9"):
        decode.sample(model, {}, images, prompt, 4, rng, top_k=9)


@pytest.mark.parametrize("temperature, top_k", [(1.0, 0), (0.5, 0), (1.0, 2)])
def test_sampling_follows_the_tempered_distribution(temperature, top_k):
    model, table = _toy(seed=7, max_len=2)
    n = 4000
    images, prompt = jnp.zeros((n, 1, 1, 3)), jnp.zeros((n, 1), jnp.int32)
    tokens = np.asarray(decode.sample(model, {}, images, prompt, 2, jax.random.key(1),
                                      temperature=temperature, top_k=top_k))
    logits = table[0, 0] / temperature
    if top_k:
        logits = np.where(logits >= np.sort(logits)[-top_k], logits, -np.inf)
    want = np.exp(logits - logits.max())
    want /= want.sum()
    freq = np.bincount(tokens[:, 0], minlength=4) / n
    np.testing.assert_allclose(freq, want, atol=0.03)
    # Rows whose first token is EOS are padded after it.
    assert np.all(tokens[tokens[:, 0] == EOS, 1] == 0)


def _up_to_eos(row):
    row = list(np.asarray(row))
    return row[:row.index(EOS) + 1] if EOS in row else row


def test_log_probs_of_every_decoding_on_toy():
    model, table = _toy(seed=2, max_len=5, eos_boost=1.0)
    images, prompt = jnp.zeros((6, 1, 1, 3)), jnp.zeros((6, 1), jnp.int32)
    outputs = [decode.greedy(model, {}, images, prompt, max_len=5),
               decode.sample(model, {}, images, prompt, 5, jax.random.key(3)),
               decode.beam_search(model, {}, images, prompt, max_len=5, beam_size=3)[0]]
    for tokens in outputs:
        got = decode.log_probs(model, {}, images, prompt, tokens)
        want = [_toy_log_prob(table, _up_to_eos(row)) for row in tokens]
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_log_probs_undo_the_beam_length_penalty_on_captioner(tiny):
    model, params, images, prompt, argmax_path = tiny
    # An EOS id the random model writes: the third token of the first argmax path.
    eos = int(argmax_path[0, 2])
    tokens, scores = decode.beam_search(model, params, images, prompt, max_len=6,
                                        beam_size=4, alpha=0.6, eos_id=eos)
    tokens, scores = np.asarray(tokens), np.asarray(scores)
    finished = np.any(tokens == eos, axis=1)
    lengths = np.where(finished, np.argmax(tokens == eos, axis=1) + 1, 0)
    assert finished[0] and lengths[0] >= 2  # the length penalty is not 1
    # Finished: score = log-prob / ((5 + length) / 6) ** alpha; else the raw log-prob.
    want = np.where(finished, scores * ((5.0 + lengths) / 6.0) ** 0.6, scores)
    got = decode.log_probs(model, params, images, prompt, tokens, eos_id=eos)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def _bb_model_config():
    from configs import bb

    return captioner.from_config(bb.get_config().model, 250100).config


def test_a_beam_too_large_for_the_memory_is_refused_naming_it():
    with pytest.raises(decode.DecodingError, match=r"^beam_size: 1000000 beams x batch 16 x 64 "
                                                   r"tokens: decoding needs about [\d.]+ GiB, "
                                                   r"more than the 80.0 GiB"):
        decode.Decoding("beam", beam_size=1_000_000).check_size(
            _bb_model_config(), 16, 64, 64, 80 * 2**30)


def test_a_batch_too_large_for_the_memory_is_refused_naming_it():
    with pytest.raises(decode.DecodingError, match=r"^batch_size: batch 100000000 x 64"):
        decode.Decoding("greedy").check_size(_bb_model_config(), 10**8, 64, 64, 80 * 2**30)


def test_a_length_beyond_the_trained_captions_is_refused():
    with pytest.raises(decode.DecodingError, match=r"^max_len: 100 is longer than the run "
                                                   r"was trained or evaluated for \(at most 64: "):
        decode.Decoding("greedy").check_size(_bb_model_config(), 16, 100, 64, 80 * 2**30)


def test_the_papers_evaluation_batch_fits_one_gpu():
    decode.Decoding("beam").check_size(_bb_model_config(), 256, 64, 64, 80 * 2**30)
