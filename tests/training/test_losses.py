"""Tests of training/losses.py against optax's cross entropy and direct formulas."""

import functools
import importlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from data.pipeline import packing
from model import captioner, layers
from tests import tiny
from training import losses


def _batch(seed=0, batch=3, length=5, vocab=11):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(batch, length, vocab)).astype(np.float32)
    targets = rng.integers(1, vocab, size=(batch, length)).astype(np.int32)
    targets[0, 3:] = 0  # Padding must not count.
    targets[2, 1:] = 0
    return jnp.asarray(logits), jnp.asarray(targets)


def _cross_entropy(logits, targets, *, label_smoothing=0.0, z_loss=0.0):
    """The unfused loss of whole logits, from the fused loss's per-token parts: (mean token
    cross entropy over non-padding targets, {"loss_sum", "z_loss_sum", "weight"})."""
    token_loss, log_z = losses._token_losses(  # noqa: SLF001
        logits.astype(jnp.float32), targets, label_smoothing)
    loss_sum, z_loss_sum, weight = losses._sums(token_loss, log_z, targets, z_loss)  # noqa: SLF001
    loss = (loss_sum + z_loss_sum) / jnp.maximum(weight, 1.0)
    return loss, {"loss_sum": loss_sum, "z_loss_sum": z_loss_sum, "weight": weight}


def test_shift_right():
    out = losses.shift_right(jnp.array([[5, 6, 1, 0]]))
    np.testing.assert_array_equal(out, [[0, 5, 6, 1]])


def test_plain_cross_entropy_matches_optax_on_non_padding():
    logits, targets = _batch()
    loss, aux = _cross_entropy(logits, targets)
    per_token = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    mask = np.asarray(targets > 0)
    np.testing.assert_allclose(loss, np.asarray(per_token)[mask].mean(), rtol=1e-6)
    assert aux["weight"] == mask.sum()
    assert aux["z_loss_sum"] == 0.0


def test_z_loss_adds_squared_log_normalizer():
    logits, targets = _batch(1)
    base, _ = _cross_entropy(logits, targets)
    with_z, aux = _cross_entropy(logits, targets, z_loss=1e-4)
    log_z = np.asarray(jax.nn.logsumexp(logits, axis=-1))
    mask = np.asarray(targets > 0)
    expected = 1e-4 * (log_z[mask] ** 2).mean()
    np.testing.assert_allclose(with_z - base, expected, atol=1e-6)  # float32 difference
    np.testing.assert_allclose(aux["z_loss_sum"] / aux["weight"], expected, rtol=1e-5)


def test_label_smoothing_is_zero_at_the_smoothed_optimum():
    vocab, smoothing = 7, 0.1
    targets = jnp.array([[3, 2, 0]])
    soft = np.full((1, 3, vocab), smoothing / (vocab - 1))
    soft[0, 0, 3] = soft[0, 1, 2] = 1 - smoothing
    loss, _ = _cross_entropy(jnp.log(jnp.asarray(soft)), targets, label_smoothing=smoothing)
    np.testing.assert_allclose(loss, 0.0, atol=1e-6)


def _one_hot_cross_entropy(logits, targets, label_smoothing, z_loss):
    """T5X's formula with an explicit one-hot (this module's code before the fused loss)."""
    vocab = logits.shape[-1]
    confidence = 1.0 - label_smoothing
    low = label_smoothing / (vocab - 1)
    normalizer = -(confidence * np.log(confidence) + (vocab - 1) * low * np.log(low + 1e-20))
    soft = jax.nn.one_hot(targets, vocab) * (confidence - low) + low
    log_z = jax.nn.logsumexp(logits, axis=-1)
    token = -jnp.sum(soft * (logits - log_z[..., None]), axis=-1) - normalizer
    weights = (targets > 0).astype(jnp.float32)
    total = jnp.sum(token * weights) + jnp.sum(z_loss * log_z**2 * weights)
    return total / jnp.sum(weights)


SETTINGS = [(0.0, 0.0), (0.1, 1e-4), (0.2, 0.05)]


@pytest.mark.parametrize("label_smoothing, z_loss", SETTINGS)
def test_cross_entropy_equals_the_one_hot_formula(label_smoothing, z_loss):
    logits, targets = _batch(2)
    loss, _ = _cross_entropy(logits, targets, label_smoothing=label_smoothing, z_loss=z_loss)
    want = _one_hot_cross_entropy(logits, targets, label_smoothing, z_loss)
    np.testing.assert_allclose(loss, want, rtol=1e-6)


def _hidden_problem(seed=0, batch=3, length=11, emb=16, vocab=37):
    rng = np.random.default_rng(seed)
    hidden = jnp.asarray(rng.normal(size=(batch, length, emb)), jnp.float32)
    kernel = jnp.asarray(rng.normal(size=(emb, vocab)) / 4, jnp.float32)
    targets = rng.integers(1, vocab, size=(batch, length))
    targets[0, 5:] = 0
    targets[2, 1:] = 0
    return hidden, kernel, jnp.asarray(targets, jnp.int32)


@pytest.mark.parametrize("label_smoothing, z_loss", SETTINGS)
@pytest.mark.parametrize("chunk_len", [1, 4, 11, 16])
def test_fused_loss_with_its_gradients_equals_the_logits_path(label_smoothing, z_loss, chunk_len):
    hidden, kernel, targets = _hidden_problem()
    options = dict(label_smoothing=label_smoothing, z_loss=z_loss)

    def reference(h, k):
        return _one_hot_cross_entropy(h @ k, targets, label_smoothing, z_loss)

    def fused(h, k):
        return losses.fused_cross_entropy(h, k, targets, chunk_len=chunk_len, **options)

    want, want_grads = jax.value_and_grad(reference, argnums=(0, 1))(hidden, kernel)
    (got, aux), got_grads = jax.jit(jax.value_and_grad(fused, argnums=(0, 1), has_aux=True))(
        hidden, kernel)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    _, want_aux = _cross_entropy(hidden @ kernel, targets, **options)
    for key in want_aux:
        np.testing.assert_allclose(aux[key], want_aux[key], rtol=1e-5)
    for g, w in zip(got_grads, want_grads, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-7)


def test_fused_loss_without_gradients_runs_the_forward_only():
    hidden, kernel, targets = _hidden_problem(1)
    loss, _ = jax.jit(lambda h, k: losses.fused_cross_entropy(h, k, targets))(hidden, kernel)
    want, _ = _cross_entropy(hidden @ kernel, targets)
    np.testing.assert_allclose(loss, want, rtol=1e-6)


def _temp_bytes(fn, *args):
    # Without LLVM's optimizations of the CPU code: the buffers XLA assigns (its memory
    # analysis) are those of the optimized HLO, the same bytes, and it compiles faster.
    options = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    return jax.jit(fn).lower(*args).compile(options).memory_analysis().temp_size_in_bytes


def test_fused_loss_never_holds_the_whole_logits():
    batch, length, emb, vocab = 8, 64, 32, 32768
    hidden = jnp.zeros((batch, length, emb))
    kernel = jnp.zeros((emb, vocab))
    targets = jnp.ones((batch, length), jnp.int32)
    logits_bytes = batch * length * vocab * 4

    def full(h, k):
        return _cross_entropy(h @ k, targets)[0]

    def fused(h, k):
        return losses.fused_cross_entropy(h, k, targets, chunk_len=8)[0]

    full_bytes = _temp_bytes(jax.grad(full, argnums=(0, 1)), hidden, kernel)
    fused_bytes = _temp_bytes(jax.grad(fused, argnums=(0, 1)), hidden, kernel)
    assert full_bytes >= logits_bytes
    # One chunk's logits (1/8 of them) and their gradient, plus the kernel's gradient.
    assert fused_bytes <= logits_bytes / 2


def test_captioner_loss_equals_the_loss_of_the_models_logits():
    # One layer per stack: the fused loss reads the decoder's output, however many layers.
    model = captioner.from_config(ml_collections.ConfigDict(dict(
        vit=dict(variant="mu/8", depth=1), image_size=32, dropout=0.0,
        t5=dict(variant="t5-tiny", num_encoder_layers=1, num_decoder_layers=1))))
    params = layers.random_params(captioner.abstract_params(model))
    rng = np.random.default_rng(0)
    targets = rng.integers(2, 128, (2, 6)).astype(np.int32)
    targets[1, 4:] = 0
    batch = {"image": jnp.asarray(rng.uniform(-1, 1, (2, 32, 32, 3)), jnp.float32),
             "prompt": jnp.array([[5, 6, 0], [7, 0, 0]], jnp.int32),
             "targets": jnp.asarray(targets)}
    options = dict(label_smoothing=0.1, z_loss=1e-4)

    def reference(p):
        logits = model.apply({"params": p}, batch["image"], batch["prompt"],
                             losses.shift_right(batch["targets"]))
        return _cross_entropy(logits, batch["targets"], **options)[0]

    def fused(p):
        return losses.captioner_loss(model, p, batch, jax.random.key(0), **options)[0]

    want, want_grads = jax.jit(jax.value_and_grad(reference))(params)
    got, got_grads = jax.jit(jax.value_and_grad(fused))(params)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for g, w in zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads), strict=True):
        np.testing.assert_allclose(g, w, atol=1e-6, rtol=1e-4)


def test_shift_right_starts_each_segment_from_token_0():
    targets = jnp.array([[5, 6, 1, 7, 1, 0]])
    segments = jnp.array([[1, 1, 1, 2, 2, 0]])
    np.testing.assert_array_equal(losses.shift_right(targets, segments), [[0, 5, 6, 0, 7, 0]])


PACKED_MODELS = ("bb", "bg", "lg", "demo")


@functools.lru_cache
def _packed_case(name):
    """(model, params, padded batch, packed batch) of configs/<name>.py at its smoke variant's
    widths (demo: the tests' tiny config) in float32 without dropout: six examples in four
    languages' prompts, captions of 1 to max_target_len tokens, packed into 4 rows."""
    config = (tiny.tiny_config("demo_data") if name == "demo"
              else importlib.import_module(f"configs.{name}").get_config("smoke"))
    config = config.copy_and_resolve_references()
    with config.unlocked():
        config.model.update(dtype="float32", dropout=0.0)
    model = captioner.from_config(config.model, 200)
    params = layers.random_params(captioner.abstract_params(model), seed=1)
    rng = np.random.default_rng(0)
    max_prompt, max_target = config.data.max_prompt_len, config.data.max_target_len
    prompt_ids = {2: [10, 1], 3: [11, 12, 1]}  # Two prompt lengths: "<2xx>" tokenizations.
    prompts = np.zeros((6, max_prompt), np.int32)
    targets = np.zeros((6, max_target), np.int32)
    for i, (p, t) in enumerate(zip([2, 3, 2, 3, 3, 2], [1, max_target, 5, 3, 9, 2],
                                   strict=True)):
        prompts[i, :p] = prompt_ids[p] if i < 2 else rng.integers(13, 200, p)
        targets[i, :t] = rng.integers(2, 200, t)
    images = rng.integers(0, 256, (6, config.model.image_size, config.model.image_size, 3),
                          dtype=np.uint8)
    n = model.num_image_tokens
    layout = packing.Layout(6, 4, n, n + max_prompt, max_target, groups=1, accum=1)
    rows = packing.pack(prompts, targets, layout, first=0)
    assert rows["packed"].all()
    return (model, params, {"image": images, "prompt": prompts, "targets": targets},
            {"image": images, **rows})


@functools.lru_cache
def _loss_and_grads(name):
    """(padded, packed) of the train step's (loss, gradients) on `_packed_case(name)`."""
    model, params, padded, packed = _packed_case(name)
    step = jax.jit(jax.value_and_grad(lambda p, batch: losses.captioner_loss(
        model, p, batch, jax.random.key(0), label_smoothing=0.1, z_loss=1e-4)[0]))
    return step(params, padded), step(params, packed)


def _per_example_losses(model, params, batch):
    """{example: mean token cross entropy} from the model's full float32 logits."""
    packed = "decoder_segments" in batch
    segments = batch.get("decoder_segments")
    hidden = model.apply({"params": params}, batch["image"], batch if packed else batch["prompt"],
                         losses.shift_right(batch["targets"], segments),
                         method="packed_hidden" if packed else "hidden")
    logits = hidden @ captioner.logits_kernel(params)
    tokens = np.asarray(optax.softmax_cross_entropy_with_integer_labels(logits,
                                                                        batch["targets"]))
    if not packed:
        mask = batch["targets"] > 0
        return {i: tokens[i][mask[i]].mean() for i in range(len(tokens))}
    out = {}
    for r in range(len(tokens)):
        for s in range(1, segments[r].max() + 1):
            slots = batch["image_slots"][r][batch["encoder_segments"][r] == s]
            out[int(slots[0]) // model.num_image_tokens] = tokens[r][segments[r] == s].mean()
    return out


@pytest.mark.parametrize("name", PACKED_MODELS)
def test_packed_per_example_losses_equal_the_padded(name):
    model, params, padded, packed = _packed_case(name)
    want = _per_example_losses(model, params, padded)
    got = _per_example_losses(model, params, packed)
    assert sorted(got) == sorted(want)
    for example, loss in want.items():
        np.testing.assert_allclose(got[example], loss, rtol=1e-5, err_msg=f"example {example}")


@pytest.mark.parametrize("name", PACKED_MODELS)
def test_packed_batch_loss_equals_the_padded(name):
    (want, _), (got, _) = _loss_and_grads(name)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("name", PACKED_MODELS)
def test_packed_gradients_equal_the_padded(name):
    (_, want), (_, got) = _loss_and_grads(name)
    # Within 1e-5 of the largest gradient entry: entries that are 0 in exact arithmetic (the MAP
    # head's key bias: softmax ignores a shift) are rounding noise of either step.
    scale = max(float(np.abs(w).max()) for w in jax.tree.leaves(want))
    for (path, g), w in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want),
                            strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * scale,
                                   err_msg=jax.tree_util.keystr(path))
