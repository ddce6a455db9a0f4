"""Tests of the ViT: variants, big_vision parameter tree, pooling, attention, scan."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import layers, vit

MU = vit.vit_config("mu/8")
# Inputs drawn by numpy: jax.random would compile a sampler for each shape.
IMAGES = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (2, 32, 32, 3)), jnp.float32)


def _params(config, seed=0):
    abstract = jax.eval_shape(vit.ViT(config).init, jax.random.key(0), IMAGES)["params"]
    return layers.random_params(abstract, seed)


def _apply(config, params, images=IMAGES):
    return jax.jit(lambda p, x: vit.ViT(config).apply({"params": p}, x))(params, images)


def test_variants_follow_big_vision_table():
    b16 = vit.vit_config("B/16")
    assert (b16.width, b16.depth, b16.mlp_dim, b16.num_heads, b16.patch_size) == (
        768, 12, 3072, 12, (16, 16))
    g14 = vit.vit_config("g/14")
    assert (g14.width, g14.depth, g14.mlp_dim, g14.num_heads, g14.patch_size) == (
        1408, 40, 6144, 16, (14, 14))
    so = vit.vit_config("So400m/14")
    assert (so.width, so.depth, so.mlp_dim) == (1152, 27, 4304)
    assert vit.vit_config("L").patch_size == (16, 16)
    assert vit.vit_config("B/16", depth=2, width=None).depth == 2


def test_bad_variants_are_refused():
    for bad, message in [("Q/16", "'Q/16'"), ("B/x", "patch"), ("B/16:pool", "patch")]:
        with pytest.raises(ValueError, match=message):
            vit.vit_config(bad)
    with pytest.raises(ValueError, match="pool 'avg'"):
        vit.vit_config("B/16", pool="avg")
    with pytest.raises(ValueError, match="patch size"):
        vit.ViT(MU).init(jax.random.key(0), jnp.zeros((1, 30, 30, 3)))


def test_parameter_tree_matches_big_vision():
    cfg = vit.vit_config("mu/8", pool="map")
    abstract = nn.unbox(jax.eval_shape(vit.ViT(cfg).init, jax.random.key(0), IMAGES)["params"])
    flat = {"/".join(p.key for p in path): x.shape
            for path, x in jax.tree_util.tree_flatten_with_path(abstract)[0]}
    w, m, h = 32, 64, 2
    expected = {
        "embedding/kernel": (8, 8, 3, w), "embedding/bias": (w,),
        "pos_embedding": (1, 16, w),
        "Transformer/encoderblock_1/LayerNorm_0/scale": (w,),
        "Transformer/encoderblock_1/LayerNorm_1/bias": (w,),
        "Transformer/encoderblock_0/MultiHeadDotProductAttention_0/query/kernel": (w, h, 16),
        "Transformer/encoderblock_0/MultiHeadDotProductAttention_0/value/bias": (h, 16),
        "Transformer/encoderblock_0/MultiHeadDotProductAttention_0/out/kernel": (h, 16, w),
        "Transformer/encoderblock_0/MultiHeadDotProductAttention_0/out/bias": (w,),
        "Transformer/encoderblock_0/MlpBlock_0/Dense_0/kernel": (w, m),
        "Transformer/encoderblock_0/MlpBlock_0/Dense_1/kernel": (m, w),
        "Transformer/encoder_norm/scale": (w,),
        "MAPHead_0/probe": (1, 1, w),
        "MAPHead_0/MultiHeadDotProductAttention_0/key/kernel": (w, h, 16),
        "MAPHead_0/LayerNorm_0/bias": (w,),
        "MAPHead_0/MlpBlock_0/Dense_1/bias": (w,),
    }
    for key, shape in expected.items():
        assert flat[key] == shape, key
    assert len(flat) == 2 + 1 + 2 * 16 + 2 + 1 + 8 + 2 + 4
    # 'tok' adds a cls token; 'sincos2d' has no position parameter.
    tok = jax.eval_shape(vit.ViT(vit.vit_config("mu/8", pool="tok", posemb="sincos2d")).init,
                         jax.random.key(0), IMAGES)["params"]
    assert "cls" in tok and "pos_embedding" not in tok and "MAPHead_0" not in tok


def test_attention_matches_flax_multi_head_attention():
    """Our attention against flax's own (which big_vision uses) on one set of weights."""
    x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 5, 32)), jnp.float32)
    ours = vit.MultiHeadDotProductAttention(num_heads=4)
    params = layers.random_params(jax.eval_shape(ours.init, jax.random.key(0), x, x)["params"])
    reference = nn.MultiHeadDotProductAttention(num_heads=4)
    want = reference.apply({"params": params}, x, x)
    np.testing.assert_allclose(ours.apply({"params": params}, x, x), want, atol=1e-5)


@pytest.fixture(scope="module")
def gap():
    """(params, pooled, tokens) of the 'gap' ViT mu/8 on IMAGES."""
    params = _params(MU)
    return params, *_apply(MU, params)


def test_gap_pools_by_mean(gap):
    _, pooled, tokens = gap
    assert pooled.shape == (2, 32) and tokens.shape == (2, 16, 32)
    np.testing.assert_allclose(pooled, tokens.mean(axis=1), atol=1e-6)


def test_tok_pools_by_cls(gap):
    params, _, tokens = gap
    tok_cfg = vit.vit_config("mu/8", pool="tok")
    tok_params = {**params, "cls": jnp.full((1, 1, 32), 0.3)}
    pooled_tok, tokens_tok = _apply(tok_cfg, tok_params)
    assert tokens_tok.shape == (2, 16, 32)
    # The cls token takes part in attention, so patch tokens change too.
    assert not np.allclose(tokens_tok, tokens, atol=1e-4)
    assert not np.allclose(pooled_tok, tokens_tok.mean(axis=1), atol=1e-4)


def test_sincos2d_embeddings_formula():
    pe = np.asarray(vit.posemb_sincos_2d(4, 4, 32))
    assert pe.shape == (1, 16, 32)
    omega = 1.0 / 10_000 ** (np.arange(8) / 7)
    y, x = 2, 3  # patch index 2 * 4 + 3
    want = np.concatenate([np.sin(x * omega), np.cos(x * omega),
                           np.sin(y * omega), np.cos(y * omega)])
    np.testing.assert_allclose(pe[0, 11], want, rtol=1e-6)


def test_scan_matches_per_layer_blocks():
    params = _params(MU)
    scan_cfg = vit.vit_config("mu/8", scan=True)
    scanned = layers.layers_to_scan(params)
    assert "encoderblock" in scanned["Transformer"]
    assert scanned["Transformer"]["encoderblock"]["MlpBlock_0"]["Dense_0"]["kernel"].shape == (
        2, 32, 64)
    want = _apply(MU, params)
    got = _apply(scan_cfg, scanned)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-5)
    back = layers.scan_to_layers(scanned)
    jax.tree_util.tree_map(np.testing.assert_array_equal, back, params)


def _tok_bf16():
    """A [cls] ViT in bf16: 16 patches + [cls] = 17 tokens, an odd length cuDNN cannot take."""
    config = vit.vit_config("mu/8", pool="tok", dtype="bfloat16")
    return config, _params(config)


def test_an_odd_sequence_runs_padded_to_even_where_cudnn_attends():
    config, params = _tok_bf16()
    with layers.cudnn_stand_in():  # Traced as for a GPU.
        jaxpr = str(jax.make_jaxpr(
            lambda p, x: vit.ViT(config).apply({"params": p}, x))(params, IMAGES))
    assert "bf16[2,18,32]" in jaxpr


def test_the_pad_token_changes_no_output():
    config, params = _tok_bf16()
    want = _apply(config, params)
    with layers.cudnn_stand_in():
        got = _apply(config, params)
    # Within bf16 rounding (a pad key left unmasked moves these outputs by 0.12 and more).
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32),
                                   atol=2 ** -5)
