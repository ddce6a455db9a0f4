"""Tests of the mT5 encoder-decoder: tree layout, math pieces, caching, scan."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import layers, t5

TINY = t5.t5_config("t5-tiny")
BATCH, ENC_LEN, DEC_LEN = 2, 5, 5


def _inputs(cfg=TINY):
    # Drawn by numpy: jax.random would compile a sampler for each shape.
    rng = np.random.default_rng(1)
    emb = jnp.asarray(rng.standard_normal((BATCH, ENC_LEN, cfg.emb_dim)), jnp.float32)
    # Example 0 has 3 valid encoder positions, example 1 all 5.
    mask = jnp.arange(ENC_LEN)[None, :] < jnp.array([[3], [ENC_LEN]])
    dec = jnp.asarray(rng.integers(0, cfg.vocab_size, (BATCH, DEC_LEN)), jnp.int32)
    return emb, mask, dec


def _params(model, cfg=TINY, seed=0):
    abstract = jax.eval_shape(model.init, jax.random.key(0), *_inputs(cfg))["params"]
    return layers.random_params(abstract, seed)


def _forward(model):
    return jax.jit(lambda p, e, m, d: model.apply({"params": p}, e, m, d))


@pytest.fixture(scope="module")
def tiny():
    """The per-layer model, its random params, inputs and reference logits."""
    model = t5.T5(TINY)
    params = _params(model)
    emb, mask, dec = _inputs()
    forward = _forward(model)
    return dict(model=model, params=params, emb=emb, mask=mask, dec=dec, forward=forward,
                logits=forward(params, emb, mask, dec))


def test_variants_match_t5x_gin_sizes():
    small = t5.t5_config("mt5-small")
    assert (small.emb_dim, small.mlp_dim, small.num_heads, small.head_dim,
            small.num_encoder_layers, small.num_decoder_layers, small.vocab_size) == (
                512, 1024, 6, 64, 8, 8, 250112)
    large = t5.t5_config("mt5-large")
    assert (large.emb_dim, large.mlp_dim, large.num_heads, large.num_encoder_layers) == (
        1024, 2816, 16, 24)
    assert t5.t5_config("mt5-base", emb_dim=64, num_heads=None).emb_dim == 64
    with pytest.raises(ValueError, match="mt5-huge"):
        t5.t5_config("mt5-huge")
    with pytest.raises(ValueError, match="emb_dims"):
        t5.t5_config("mt5-base", emb_dims=3)


def test_parameter_tree_matches_t5x_layout():
    model = t5.T5(TINY)
    params = nn.unbox(jax.eval_shape(model.init, jax.random.key(0), *_inputs())["params"])
    e, m, h, d, v = TINY.emb_dim, TINY.mlp_dim, TINY.num_heads, TINY.head_dim, TINY.vocab_size
    flat = {"/".join(p.key for p in path): x.shape
            for path, x in jax.tree_util.tree_flatten_with_path(params)[0]}
    expected = {
        "token_embedder/embedding": (v, e),
        "encoder/relpos_bias/rel_embedding": (h, 32),
        "encoder/layers_1/attention/query/kernel": (e, h * d),
        "encoder/layers_1/attention/out/kernel": (h * d, e),
        "encoder/layers_0/pre_attention_layer_norm/scale": (e,),
        "encoder/layers_0/mlp/wi_0/kernel": (e, m),
        "encoder/layers_0/mlp/wi_1/kernel": (e, m),
        "encoder/layers_0/mlp/wo/kernel": (m, e),
        "encoder/encoder_norm/scale": (e,),
        "decoder/relpos_bias/rel_embedding": (h, 32),
        "decoder/layers_1/encoder_decoder_attention/key/kernel": (e, h * d),
        "decoder/layers_1/self_attention/value/kernel": (e, h * d),
        "decoder/layers_0/pre_cross_attention_layer_norm/scale": (e,),
        "decoder/decoder_norm/scale": (e,),
        "decoder/logits_dense/kernel": (e, v),
    }
    for key, shape in expected.items():
        assert flat[key] == shape, key
    # 2 encoder layers * 9 + 2 decoder layers * 14 + 2 norms + 2 relpos + emb + logits.
    assert len(flat) == 2 * 9 + 2 * 14 + 2 + 2 + 1 + 1
    assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(params))


def _reference_bucket(rel, bidirectional, num_buckets=32, max_distance=128):
    """Scalar transcription of the T5 paper's bucketing (mesh_tensorflow)."""
    n = -rel
    ret = 0
    if bidirectional:
        num_buckets //= 2
        if n < 0:
            ret += num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    large = max_exact + int(math.log(n / max_exact + 1.1920929e-07)
                            / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_bucket_matches_reference(bidirectional):
    rel = np.arange(-300, 301)
    got = np.asarray(t5.relative_position_bucket(jnp.asarray(rel), bidirectional, 32, 128))
    want = np.array([_reference_bucket(int(r), bidirectional) for r in rel])
    np.testing.assert_array_equal(got, want)
    # Hand-checked anchors: keys before the query use buckets 0..15 (or 0..31
    # causal), keys after it 16..31; far offsets share the last bucket.
    b = dict(zip(rel.tolist(), got.tolist(), strict=True))
    if bidirectional:
        assert (b[0], b[-1], b[1], b[-7], b[-300], b[300]) == (0, 1, 17, 7, 15, 31)
    else:
        assert (b[0], b[5], b[-3], b[-15], b[-300]) == (0, 0, 3, 15, 31)


def test_rms_norm_matches_formula():
    x = jax.random.normal(jax.random.key(0), (3, 8)) * 3.0
    norm = layers.RMSNorm()
    params = norm.init(jax.random.key(1), x)
    scale = jnp.linspace(0.5, 2.0, 8)
    y = norm.apply({"params": {"scale": scale}}, x)
    want = np.asarray(x) / np.sqrt(np.mean(np.asarray(x) ** 2, -1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, want * np.asarray(scale), rtol=1e-5)
    assert nn.unbox(params)["params"]["scale"].shape == (8,)


def test_query_initializer_folds_in_depth_scaling():
    attn = t5.Attention(num_heads=4, head_dim=64)
    x = jnp.zeros((1, 2, 256))
    # Jitted: one program instead of every op of the initializers compiled on its own.
    params = nn.unbox(jax.jit(attn.init)(jax.random.key(0), x, x)["params"])
    # variance_scaling(1, fan_in, normal): std 1/sqrt(256); the query also / sqrt(64).
    np.testing.assert_allclose(np.std(params["key"]["kernel"]), 1 / 16, rtol=0.05)
    np.testing.assert_allclose(np.std(params["query"]["kernel"]), 1 / 16 / 8, rtol=0.05)
    np.testing.assert_allclose(np.std(params["out"]["kernel"]), 1 / 16, rtol=0.05)


def test_encoder_ignores_padding_positions(tiny):
    model, params, emb, mask = tiny["model"], tiny["params"], tiny["emb"], tiny["mask"]
    encode = jax.jit(lambda e: model.apply({"params": params}, e, mask, method="encode"))
    encoded = encode(emb)
    encoded2 = encode(emb.at[0, 3:].set(100.0))  # example 0 has 3 valid positions
    np.testing.assert_allclose(encoded[0, :3], encoded2[0, :3], atol=1e-5)
    np.testing.assert_allclose(encoded[1], encoded2[1], atol=1e-6)
    assert not np.allclose(encoded[0, 3:], encoded2[0, 3:])


def test_decoder_is_causal(tiny):
    params, emb, mask = tiny["params"], tiny["emb"], tiny["mask"]
    dec, logits = tiny["dec"], tiny["logits"]
    changed = dec.at[:, 3].set((dec[:, 3] + 1) % TINY.vocab_size)
    logits2 = tiny["forward"](params, emb, mask, changed)
    np.testing.assert_allclose(logits[:, :3], logits2[:, :3], atol=1e-5)
    assert not np.allclose(logits[:, 3:], logits2[:, 3:])
    assert logits.dtype == jnp.float32 and logits.shape == (BATCH, DEC_LEN, TINY.vocab_size)


def test_a_packed_segment_gives_the_logits_of_its_example_alone(tiny):
    # One row holds example A (encoder positions 0-1, decoder 0-1) and B (2-4, 2-4): each
    # segment attends within itself (T5's relative buckets are offsets, the same in the row).
    model, params, emb, dec = tiny["model"], tiny["params"], tiny["emb"], tiny["dec"]

    def logits(emb, mask, dec, segments=None):
        def run(module):
            encoded = module.encoder(emb, mask, segments=segments and segments[1])
            return module.decoder(encoded, mask, dec, segments=segments)
        return nn.apply(run, model)({"params": params})

    segments = jnp.array([[1, 1, 2, 2, 2]])
    packed = logits(emb[:1], segments > 0, dec[:1], (segments, segments))
    for start, length in ((0, 2), (2, 3)):
        alone_emb = jnp.zeros_like(emb[:1]).at[0, :length].set(emb[0, start:start + length])
        alone_dec = jnp.zeros_like(dec[:1]).at[0, :length].set(dec[0, start:start + length])
        alone = logits(alone_emb, jnp.arange(ENC_LEN)[None] < length, alone_dec)
        np.testing.assert_allclose(packed[0, start:start + length], alone[0, :length],
                                   rtol=1e-5, atol=1e-5)




def _cached_logits(model, params, emb, mask, dec):
    """Feeds dec one position at a time through the cache."""
    variables = {"params": params}
    # Jitted: op by op, every op of the encoder would compile on its own.
    encoded = jax.jit(lambda e: model.apply(variables, e, mask, method="encode"))(emb)
    cache = jax.eval_shape(lambda: model.apply(
        variables, encoded, mask, dec, decode=True, method="decode", mutable=["cache"])[1])
    cache = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), cache["cache"])

    @jax.jit
    def step(cache, token):
        logits, state = model.apply({**variables, "cache": cache}, encoded, mask, token,
                                    decode=True, method="decode", mutable=["cache"])
        return logits[:, 0], state["cache"]

    out = []
    for i in range(dec.shape[1]):
        logits, cache = step(cache, dec[:, i:i + 1])
        out.append(logits)
    return jnp.stack(out, axis=1)


@pytest.mark.parametrize("scan", [False, True])
def test_cached_decoding_equals_full_forward(tiny, scan):
    params = layers.layers_to_scan(tiny["params"]) if scan else tiny["params"]
    model = t5.T5(t5.t5_config("t5-tiny", scan=scan))
    cached = _cached_logits(model, params, tiny["emb"], tiny["mask"], tiny["dec"])
    np.testing.assert_allclose(cached, tiny["logits"], atol=1e-5)


def test_layers_to_scan_stacks_each_layers_parameters(tiny):
    params = tiny["params"]
    scanned = layers.layers_to_scan(params)
    assert scanned["encoder"]["layers"]["mlp"]["wo"]["kernel"].shape == (2, 64, 32)
    np.testing.assert_array_equal(
        scanned["decoder"]["layers"]["self_attention"]["query"]["kernel"][1],
        params["decoder"]["layers_1"]["self_attention"]["query"]["kernel"])


def test_the_scanned_model_builds_the_tree_of_layers_to_scan(tiny):
    scan_model = t5.T5(t5.t5_config("t5-tiny", scan=True))
    scanned = layers.layers_to_scan(tiny["params"])
    # The scanned model builds exactly this tree itself.
    abstract = nn.unbox(jax.eval_shape(scan_model.init, jax.random.key(0), *_inputs())["params"])
    assert jax.tree_util.tree_structure(abstract) == jax.tree_util.tree_structure(scanned)


def test_scan_gives_the_per_layer_outputs(tiny):
    scan_model = t5.T5(t5.t5_config("t5-tiny", scan=True))
    scanned = layers.layers_to_scan(tiny["params"])
    got = _forward(scan_model)(scanned, tiny["emb"], tiny["mask"], tiny["dec"])
    np.testing.assert_allclose(got, tiny["logits"], atol=1e-5)


def test_scan_to_layers_round_trips(tiny):
    params = tiny["params"]
    scanned = layers.layers_to_scan(params)
    # Round trip back to the checkpoint layout.
    back = layers.scan_to_layers(scanned)
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(params)
    jax.tree_util.tree_map(np.testing.assert_array_equal, back, params)


def test_layers_to_scan_refuses_a_missing_layer(tiny):
    params = tiny["params"]
    broken = {**params, "encoder": {k: v for k, v in params["encoder"].items() if k != "layers_0"}}
    with pytest.raises(ValueError, match="layers"):
        layers.layers_to_scan(broken)




def test_remat_gives_same_gradients(tiny):
    emb, mask, dec = tiny["emb"], tiny["mask"], tiny["dec"]
    remat_model = t5.T5(t5.t5_config("t5-tiny", remat=True))

    def grads(model):
        def loss(p):
            return jnp.mean(model.apply({"params": p}, emb, mask, dec) ** 2)
        return jax.jit(jax.grad(loss))(tiny["params"])

    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6),
                           grads(tiny["model"]), grads(remat_model))


def test_bfloat16_activations_keep_float32_params(tiny):
    bf16 = t5.T5(t5.t5_config("t5-tiny", dtype=jnp.bfloat16))
    abstract = nn.unbox(jax.eval_shape(bf16.init, jax.random.key(0), *_inputs())["params"])
    assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(abstract))


def test_bfloat16_activations_keep_float32_logits_near_float32s(tiny):
    bf16 = t5.T5(t5.t5_config("t5-tiny", dtype=jnp.bfloat16))
    want = tiny["logits"]
    got = _forward(bf16)(tiny["params"], tiny["emb"], tiny["mask"], tiny["dec"])
    assert got.dtype == jnp.float32
    assert float(jnp.mean(jnp.abs(got - want))) < 0.05 * float(jnp.mean(jnp.abs(want)))


def test_dropout_only_in_training(tiny):
    model = t5.T5(t5.t5_config("t5-tiny", dropout_rate=0.3))
    emb, mask, dec = tiny["emb"], tiny["mask"], tiny["dec"]
    np.testing.assert_array_equal(_forward(model)(tiny["params"], emb, mask, dec), tiny["logits"])
    train = jax.jit(lambda rng: model.apply({"params": tiny["params"]}, emb, mask, dec,
                                            train=True, rngs={"dropout": rng}))
    train1, train2 = train(jax.random.key(1)), train(jax.random.key(2))
    assert not np.allclose(train1, tiny["logits"]) and not np.allclose(train1, train2)
