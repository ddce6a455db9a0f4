"""Tests of the captioner: parameter tree, fusion, encoder mask, from_config."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from model import captioner, layers
from model import partitioning as part
from model import t5 as t5_lib
from model import vit as vit_lib

IMAGE_SIZE = 32  # 4x4 patches of 8 pixels for ViT "mu/8"


def _model_config(**fields):
    config = ml_collections.ConfigDict(dict(
        vit=dict(variant="mu/8"), t5=dict(variant="t5-tiny"), image_size=IMAGE_SIZE))
    config.update(fields)
    return config


def _inputs(batch=2):
    # Drawn by numpy: jax.random would compile a sampler for the shape.
    images = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (batch, IMAGE_SIZE,
                                                                   IMAGE_SIZE, 3)), jnp.float32)
    # Example 1's prompt is shorter: one padding position at the end.
    prompt = jnp.array([[5, 6, 7], [8, 9, 0]], jnp.int32)[:batch]
    targets = jnp.array([[0, 11, 12, 13], [0, 14, 15, 16]], jnp.int32)[:batch]
    return images, prompt, targets


def _random_params(model, seed=0):
    return layers.random_params(captioner.abstract_params(model), seed)


@pytest.fixture(scope="module")
def pooled():
    """The pooled-fusion model, random params, and jitted encode / forward."""
    model = captioner.from_config(_model_config())
    params = _random_params(model)
    encode = jax.jit(lambda p, i, t: model.apply({"params": p}, i, t, method="encode"))
    forward = jax.jit(lambda p, i, t, d: model.apply({"params": p}, i, t, d))
    return model, params, encode, forward


def test_parameter_tree_has_the_three_towers(pooled):
    model, params, *_ = pooled
    assert set(params) == {"img", "img_proj", "t5"}
    assert params["img_proj"]["kernel"].shape == (32, 32)  # ViT width -> emb_dim
    assert params["img_proj"]["bias"].shape == (32,)
    assert "embedding" in params["img"] and "Transformer" in params["img"]
    assert params["t5"]["token_embedder"]["embedding"].shape == (128, 32)
    boxed = captioner.abstract_params(model, boxed=True)
    assert isinstance(boxed["t5"]["token_embedder"]["embedding"], nn.LogicallyPartitioned)


@pytest.mark.parametrize("fusion", ["pooled", "patches"])
def test_encoder_gives_the_image_tokens_with_the_prompt_mask(pooled, fusion):
    if fusion == "pooled":
        model, params, encode, _ = pooled
    else:
        model = captioner.from_config(_model_config(fusion=fusion))
        params = _random_params(model)
        encode = jax.jit(lambda p, i, t: model.apply({"params": p}, i, t, method="encode"))
    images, prompt, _ = _inputs()
    encoded, mask = encode(params, images, prompt)
    num_image = 1 if fusion == "pooled" else 16
    assert model.num_image_tokens == num_image
    assert encoded.shape == (2, num_image + 3, 32) and mask.shape == (2, num_image + 3)
    want = np.ones((2, num_image + 3), bool)
    want[1, -1] = False  # only the prompt padding is masked
    np.testing.assert_array_equal(mask, want)


def test_the_image_position_is_valid_with_an_empty_prompt(pooled):
    _, params, encode, _ = pooled
    images, prompt, _ = _inputs()
    # The image position is valid even with an empty prompt.
    _, mask = encode(params, images, prompt.at[0].set(0))
    np.testing.assert_array_equal(mask[0], [True, False, False, False])


def test_logits_ignore_prompt_padding(pooled):
    _, params, _, forward = pooled
    images, prompt, targets = _inputs()
    logits = forward(params, images, prompt, targets)
    assert logits.shape == (2, 4, 128) and logits.dtype == jnp.float32
    # Padding appended to the prompt changes nothing.
    padded = jnp.pad(prompt, ((0, 0), (0, 2)))
    np.testing.assert_allclose(forward(params, images, padded, targets), logits, atol=1e-5)


def test_logits_depend_on_the_image(pooled):
    _, params, _, forward = pooled
    images, prompt, targets = _inputs()
    logits = forward(params, images, prompt, targets)
    # Another image changes the caption distribution.
    other = forward(params, images[::-1], prompt, targets)
    assert not np.allclose(other[0], logits[0], atol=1e-3)


def test_from_config_defaults_come_from_the_dataclasses():
    config = captioner.captioner_config(ml_collections.ConfigDict(dict(
        vit=dict(variant="B/16", pool=None), t5=dict(variant="mt5-base", emb_dim=None))))
    # Missing and None keys keep the dataclass defaults, the one place they live.
    vit_default = {f.name: f.default for f in dataclasses.fields(vit_lib.ViTConfig)}
    t5_default = {f.name: f.default for f in dataclasses.fields(t5_lib.T5Config)}
    default = {f.name: f.default for f in dataclasses.fields(captioner.CaptionerConfig)}
    assert (config.vit.pool, config.vit.posemb, config.vit.dropout_rate) == (
        vit_default["pool"], vit_default["posemb"], vit_default["dropout_rate"])
    assert (config.t5.dropout_rate, config.t5.scan, config.t5.dtype) == (
        t5_default["dropout_rate"], t5_default["scan"], t5_default["dtype"])
    assert (config.fusion, config.image_size) == (default["fusion"], default["image_size"])
    # The variants' sizes.
    assert (config.vit.width, config.vit.patch_size) == (768, (16, 16))
    assert (config.t5.emb_dim, config.t5.num_encoder_layers) == (768, 12)


def test_from_config_overrides_apply():
    config = captioner.captioner_config(ml_collections.ConfigDict(dict(
        vit=dict(variant="g/14", depth=2, width=None, pool="map", dropout=0.2),
        t5=dict(variant="mt5-large", num_decoder_layers=3), dtype="bfloat16",
        dropout=0.1, scan=True, image_size=28)))
    assert (config.vit.width, config.vit.depth, config.vit.pool) == (1408, 2, "map")
    assert config.vit.dropout_rate == 0.2 and config.image_size == 28
    assert (config.t5.emb_dim, config.t5.num_decoder_layers, config.t5.dropout_rate) == (
        1024, 3, 0.1)
    assert config.t5.dtype == jnp.bfloat16 and config.vit.scan and config.t5.scan


@pytest.mark.parametrize("fields, message", [
    (dict(vit=dict(variant="X/16")), "config.model.vit.*'X/16'"),
    (dict(vit=dict(variant="B/16", widht=3)), "widht"),
    (dict(t5=dict(variant="mt5-base", emb=3)), "emb"),
    (dict(fusion="concat"), "concat"),
    (dict(image_size=100), "image_size 100"),
    (dict(vit=dict(variant="B/16", pool="cls")), "cls"),
    (dict(learning_rate=1.0), "learning_rate"),
    (dict(vit=dict(pool="map")), "config.model.vit.variant is required"),
    (dict(vit=dict(variant="B/16"), t5=dict()), "config.model.t5.variant is required"),
])
def test_from_config_errors_name_the_culprit(fields, message):
    fields = {"vit": {"variant": "B/16"}, "t5": {"variant": "mt5-base"}, **fields}
    with pytest.raises(ValueError, match=message):
        captioner.captioner_config(ml_collections.ConfigDict(fields))


def test_bfloat16_model_keeps_float32_params():
    model = captioner.from_config(_model_config(dtype="bfloat16"))
    abstract = captioner.abstract_params(model, boxed=False)
    assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(abstract))


def test_bfloat16_model_gives_finite_float32_logits(pooled):
    _, params, *_ = pooled
    model = captioner.from_config(_model_config(dtype="bfloat16"))
    images, prompt, targets = _inputs()
    logits = jax.jit(lambda p: model.apply({"params": p}, images, prompt, targets))(params)
    assert logits.dtype == jnp.float32 and np.all(np.isfinite(logits))


def _partition_names(boxed):
    return {"/".join(p.key for p in path if hasattr(p, "key")): tuple(spec)
            for path, spec in jax.tree_util.tree_flatten_with_path(
                nn.get_partition_spec(boxed),
                is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))[0]}


@pytest.mark.parametrize("scan", [False, True])
def test_every_parameter_has_logical_axis_names(scan):
    model = captioner.from_config(_model_config(scan=scan))
    boxed = captioner.abstract_params(model, boxed=True)
    leaves = jax.tree_util.tree_leaves(boxed, is_leaf=lambda x: isinstance(
        x, nn.LogicallyPartitioned))
    assert leaves and all(isinstance(x, nn.LogicallyPartitioned) for x in leaves)
    names = _partition_names(boxed)
    assert names["t5/token_embedder/embedding"] == ("vocab", "embed")
    assert names["t5/decoder/logits_dense/kernel"] == ("embed", "vocab")
    if scan:
        assert names["t5/encoder/layers/attention/query/kernel"] == ("layers", "embed", "joined_kv")
        assert names["img/Transformer/encoderblock/MlpBlock_0/Dense_0/kernel"] == (
            "layers", "embed", "mlp")
    else:
        assert names["t5/encoder/layers_0/mlp/wo/kernel"] == ("mlp", "embed")
        assert names["img/Transformer/encoderblock_1/MultiHeadDotProductAttention_0/"
                     "query/kernel"] == ("embed", "heads", "kv")


@pytest.mark.parametrize("fsdp", [False, True])
def test_logical_rules_map_params_onto_a_mesh(fsdp):
    model = captioner.from_config(_model_config())
    boxed = captioner.abstract_params(model, boxed=True)
    specs = nn.logical_to_mesh(nn.get_partition_spec(boxed), part.logical_axis_rules(fsdp))
    flat = {"/".join(p.key for p in path): spec for path, spec in
            jax.tree_util.tree_flatten_with_path(
                specs, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))[0]}
    embed = "data" if fsdp else None
    assert flat["t5/token_embedder/embedding"] == jax.sharding.PartitionSpec("model", embed)
    assert flat["t5/encoder/layers_0/mlp/wi_0/kernel"] == jax.sharding.PartitionSpec(embed, "model")
    assert flat["t5/encoder/relpos_bias/rel_embedding"] == jax.sharding.PartitionSpec("model", None)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(boxed), mesh,
                                            part.logical_axis_rules(fsdp))
    assert all(isinstance(s, jax.sharding.NamedSharding)
               for s in jax.tree_util.tree_leaves(shardings))


def test_activation_constraints_run_under_a_mesh(pooled):
    model, params, _, forward = pooled
    images, prompt, targets = _inputs()
    want = forward(params, images, prompt, targets)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    with mesh, nn.logical_axis_rules(part.logical_axis_rules(fsdp=True)):
        got = jax.jit(lambda p: model.apply({"params": p}, images, prompt, targets))(params)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_uint8_pixels_are_mapped_to_the_hosts_unit_range_bit_for_bit(pooled):
    from tools.captioning.inputs import to_unit_range

    _, params, encode, _ = pooled
    every = np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1).repeat(3, axis=-1)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(captioner.unit_range)(every)).view(np.uint32),
        to_unit_range(every).view(np.uint32))
    pixels = np.random.default_rng(0).integers(0, 256, (2, IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)
    _, prompt, _ = _inputs()
    floats = to_unit_range(pixels)
    for a, b in zip(encode(params, pixels, prompt), encode(params, floats, prompt), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="uint8 pixels or floats"):
        captioner.unit_range(jnp.zeros((1, 2, 2, 3), jnp.int32))


def test_abstract_params_are_the_shapes_of_init_params(pooled):
    model = pooled[0]
    traced = jax.eval_shape(lambda: captioner.init_params(model, jax.random.key(0)))
    cached = captioner.abstract_params(model, boxed=False)
    assert jax.tree.structure(cached) == jax.tree.structure(traced)
    assert jax.tree.leaves(cached) == jax.tree.leaves(traced)


@pytest.mark.parametrize("boxed", [True, False])
def test_abstract_params_are_a_new_tree_on_each_call(pooled, boxed):
    model = pooled[0]
    first = captioner.abstract_params(model, boxed=boxed)
    first["t5"] = None  # A caller changing its tree changes nobody else's.
    assert captioner.abstract_params(model, boxed=boxed)["t5"] is not None
