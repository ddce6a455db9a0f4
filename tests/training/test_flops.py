"""The analytic FLOP count (training/flops.py) against XLA's cost analysis.

XLA also counts elementwise ops, which the model-FLOPs count leaves out: the configs are wide
enough for those to stay under ~3%, and unrolled (XLA counts a while loop's body once)."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from benchmarks import train_step
from model import captioner, layers
from training import flops

BATCH, PROMPT_LEN, TARGET_LEN = 2, 6, 10


def _model(pool="gap", fusion="pooled", remat=False, remat_policy="full"):
    return captioner.from_config(ml_collections.ConfigDict(dict(
        vit=dict(variant="mu/8", width=128, depth=2, mlp_dim=512, num_heads=4, pool=pool),
        t5=dict(variant="t5-tiny", emb_dim=128, num_heads=4, head_dim=32, mlp_dim=512,
                num_encoder_layers=2, num_decoder_layers=2, vocab_size=512),
        image_size=32, fusion=fusion, remat=remat, remat_policy=remat_policy)))


def _inputs(model):
    size = model.config.image_size
    return (jnp.zeros((BATCH, size, size, 3)), jnp.ones((BATCH, PROMPT_LEN), jnp.int32),
            jnp.ones((BATCH, TARGET_LEN), jnp.int32))


# LLVM's optimizations of the CPU code, off: XLA's cost analysis counts the optimized HLO,
# which they do not change (the same count to the FLOP), and compiles take ~40% less time.
_NO_LLVM_OPTIMIZATIONS = {"xla_backend_optimization_level": 0,
                          "xla_llvm_disable_expensive_passes": True}


def _xla_flops(fn, *args):
    return train_step.compiled_flops(jax.jit(fn).lower(*args).compile(_NO_LLVM_OPTIMIZATIONS))


CONFIGS = [dict(pool="gap", fusion="pooled"), dict(pool="map", fusion="pooled"),
           dict(pool="tok", fusion="patches")]


@pytest.mark.parametrize("kwargs", CONFIGS, ids=lambda k: "-".join(k.values()))
def test_forward_count_matches_xla_cost_analysis(kwargs):
    model = _model(**kwargs)
    params = layers.random_params(captioner.abstract_params(model))
    counted = BATCH * sum(flops.forward_flops(model.config, PROMPT_LEN, TARGET_LEN).values())
    xla = _xla_flops(lambda p, *x: model.apply({"params": p}, *x), params, *_inputs(model))
    # XLA's surplus is the elementwise work, never missing matmuls.
    assert counted <= xla <= 1.03 * counted


@pytest.mark.parametrize("kwargs", CONFIGS, ids=lambda k: "-".join(k.values()))
def test_training_count_matches_xla_cost_analysis(kwargs):
    model = _model(**kwargs)
    params = layers.random_params(captioner.abstract_params(model))
    images, prompt, targets = _inputs(model)
    weights = jax.random.normal(jax.random.key(0), (BATCH, TARGET_LEN, 512))

    def forward_and_backward(p):
        # Any scalar of the logits: its gradient runs the full backward pass.
        logits = model.apply({"params": p}, images, prompt, targets)
        return jnp.sum(logits * weights)

    counted = BATCH * flops.train_step_flops(model.config, 1, PROMPT_LEN, TARGET_LEN)
    xla = _xla_flops(jax.grad(forward_and_backward), params)
    assert counted <= xla <= 1.05 * counted


def test_remat_adds_at_most_one_forward_of_the_layers():
    plain, remat = _model(), _model(remat=True)
    assert train_step.remat_flops_per_example(plain.config, PROMPT_LEN, TARGET_LEN) == 0
    parts = flops.forward_flops(remat.config, PROMPT_LEN, TARGET_LEN)
    extra = train_step.remat_flops_per_example(remat.config, PROMPT_LEN, TARGET_LEN)
    assert 0.5 * (parts["vit_blocks"] + parts["t5_encoder"] + parts["t5_decoder"]) < extra
    assert extra < parts["vit_blocks"] + parts["t5_encoder"] + parts["t5_decoder"]
    # Remat is not model FLOPs: the training count does not change.
    assert (flops.train_step_flops(remat.config, 1, PROMPT_LEN, TARGET_LEN)
            == flops.train_step_flops(plain.config, 1, PROMPT_LEN, TARGET_LEN))
    # Keeping the matmuls ("dots") recomputes only the attention scores.
    dots = _model(remat=True, remat_policy="dots")
    assert 0 < train_step.remat_flops_per_example(dots.config, PROMPT_LEN, TARGET_LEN) < 0.2 * extra


@pytest.mark.parametrize("policy", ["full", "dots"])
def test_xla_counts_the_recomputed_layers_of_remat(policy):
    model = _model(remat=True, remat_policy=policy)
    params = layers.random_params(captioner.abstract_params(model))
    images, prompt, targets = _inputs(model)
    loss = lambda p: jnp.sum(model.apply({"params": p}, images, prompt, targets))  # noqa: E731
    counted = BATCH * (flops.train_step_flops(model.config, 1, PROMPT_LEN, TARGET_LEN)
                       + train_step.remat_flops_per_example(model.config, PROMPT_LEN, TARGET_LEN))
    xla = _xla_flops(jax.grad(loss), params)
    assert counted <= xla <= 1.05 * counted


def test_step_flops_are_the_examples_flops():
    config = _model().config
    per_example = flops.train_step_flops(config, 1, PROMPT_LEN, TARGET_LEN)
    step = flops.train_step_flops(config, 8, PROMPT_LEN, TARGET_LEN)
    assert step == 8 * per_example


def test_mfu_is_the_share_of_the_peak():
    step = flops.train_step_flops(_model().config, 8, PROMPT_LEN, TARGET_LEN)
    np.testing.assert_allclose(flops.mfu(step, 2.0, num_devices=1, peak=step), 0.5)
    assert flops.mfu(step, 1.0, peak=None) is None or jax.default_backend() != "cpu"


def test_useful_step_flops_are_the_examples_flops_at_their_real_lengths():
    config = _model(fusion="patches").config
    prompt_lens, caption_lens = np.array([1, 3, 6]), np.array([10, 1, 4])
    enc = 16 + prompt_lens  # mu/8 at 32 px: 16 patches.
    sums = {"enc": enc.sum(), "enc2": (enc * enc).sum(), "dec": caption_lens.sum(),
            "dec2": (caption_lens ** 2).sum(), "enc_dec": (enc * caption_lens).sum()}
    want = sum(flops.train_step_flops(config, 1, int(p), int(t))
               for p, t in zip(prompt_lens, caption_lens, strict=True))
    assert flops.useful_step_flops(config, 3, sums) == pytest.approx(want, rel=1e-12)


def test_packed_step_computes_the_mt5_once_per_row():
    config = _model().config
    padded = flops.train_step_flops(config, 8, PROMPT_LEN, TARGET_LEN)
    packed = flops.train_step_flops(config, 8, PROMPT_LEN, TARGET_LEN, rows=3)
    t5 = 3 * sum(flops.t5_forward_flops(config.t5, 1 + PROMPT_LEN, TARGET_LEN).values())
    assert padded - packed == pytest.approx(5 * t5, rel=1e-12)
