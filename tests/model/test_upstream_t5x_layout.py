"""Tests of model/upstream/t5x_layout.py: scanned (scalable_t5) T5X checkpoints."""

import numpy as np
import pytest

from model.upstream import load_pretrained, t5x, t5x_layout
from tests.model import upstream_files as cf

BF16 = cf.BF16
HEADS = 2


def _scalable_per_layer(dtype=BF16, seed=0, layers=3):
    """A scalable_t5 model's parameters in the per-layer layout (relpos per layer)."""
    return cf.random_tree(cf.tiny_mt5_shapes(layers=layers, relpos_per_layer=True), seed=seed,
                          dtype=dtype)


def test_scanned_layout_is_scalable_t5_s():
    # The writer's shapes against the logical axes scan_with_axes gives them.
    scanned = cf.scan_t5x(_scalable_per_layer(), num_heads=HEADS)
    encoder = scanned["encoder"]["encoder"]
    assert "layers_0" not in scanned["encoder"] and "relpos_bias" not in scanned["encoder"]
    assert encoder["pre_attention_layer_norm"]["scale"].shape == (8, 3)       # embed, layers
    assert encoder["attention"]["query"]["kernel"].shape == (8, 3, 2, 4)      # embed, layers,
    assert encoder["attention"]["out"]["kernel"].shape == (2, 3, 4, 8)        # heads, kv ...
    assert encoder["mlp"]["wo"]["kernel"].shape == (12, 3, 8)                 # mlp, layers, embed
    assert encoder["relpos_bias"]["rel_embedding"].shape == (2, 3, 32)        # heads, layers, b
    assert scanned["decoder"]["decoder"]["encoder_decoder_attention"]["key"]["kernel"].shape == (
        8, 3, 2, 4)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_a_scanned_msgpack_checkpoint_loads_bitwise(tmp_path, dtype):
    per_layer = _scalable_per_layer(dtype)
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_100"), cf.scan_t5x(per_layer, num_heads=HEADS))
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None), per_layer)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_a_scanned_orbax_checkpoint_loads_bitwise(tmp_path, dtype):
    per_layer = _scalable_per_layer(dtype, seed=1)
    step_dir = cf.write_t5x_orbax(str(tmp_path / "orbax"), 100,
                                  cf.scan_t5x(per_layer, num_heads=HEADS))
    cf.assert_trees_bitwise_equal(t5x.load(step_dir, dtype=None), per_layer)


def test_param_scan_axis_0_is_detected_or_given(tmp_path):
    per_layer = _scalable_per_layer(seed=2)
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_1"),
                        cf.scan_t5x(per_layer, num_heads=HEADS, axis=0))
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None), per_layer)
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None, param_scan_axis=0), per_layer)
    with pytest.raises(ValueError, match=r"scanned stack 'encoder/encoder': no layer axis \(1\)"):
        t5x.load(ckpt, param_scan_axis=1)


def test_unscanned_3d_attention_kernels_are_flattened(tmp_path):
    per_layer = _scalable_per_layer(seed=3)
    stored = cf.scan_t5x(per_layer, num_heads=HEADS)
    # scan_layers=False: the layers keep their names, the kernels stay 3-D.
    three_d = cf.flatten(stored)
    unscanned = {}
    for path, value in cf.flatten(per_layer).items():
        parts = path.split("/")
        if parts[-1] == "kernel" and parts[-3].endswith("attention"):
            stacked = "/".join([parts[0], parts[0], *parts[2:]])
            value = np.take(three_d[stacked], int(parts[1].split("_")[1]), axis=1)
        unscanned[path] = value
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_1"), cf.unflatten(unscanned))
    assert unscanned["encoder/layers_0/attention/out/kernel"].ndim == 3
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None), per_layer)


def test_flattened_kernels_compute_what_the_3d_ones_did():
    # x . kernel over the stored 2-D kernel equals the contraction scalable_t5
    # does over [embed, heads, kv] (and over [heads, kv] for `out`).
    rng = np.random.default_rng(0)
    query = rng.standard_normal((8, 2, 4)).astype(np.float32)
    out = rng.standard_normal((2, 4, 8)).astype(np.float32)
    tree = {"attention": {"query": {"kernel": query}, "out": {"kernel": out}}}
    flat = t5x_layout.flatten_attention_kernels(tree)["attention"]
    x = rng.standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(x @ flat["query"]["kernel"],
                               np.einsum("e,ehd->hd", x, query).reshape(-1), rtol=1e-6)
    heads_kv = rng.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(heads_kv.reshape(-1) @ flat["out"]["kernel"],
                               np.einsum("hd,hde->e", heads_kv, out), rtol=1e-6)


def test_inconsistent_stack_names_every_shape(tmp_path):
    scanned = cf.scan_t5x(_scalable_per_layer(np.float32, seed=4), num_heads=HEADS)
    scanned["decoder"]["decoder"]["mlp"]["wo"]["kernel"] = np.ones((12, 2, 8), np.float32)
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_1"), scanned)
    with pytest.raises(ValueError, match=r"checkpoint_1/checkpoint: scanned stack 'decoder/decoder'"
                       r": no layer axis \(1 or 0\).*mlp/wo/kernel \(12, 2, 8\)"):
        t5x.load(ckpt)


def test_stack_beside_per_layer_parameters_is_refused_unscanned_trees_pass():
    tree = {"encoder": {"encoder": {"w": np.ones((2, 3))}, "layers_0": {"w": np.ones(2)}}}
    with pytest.raises(ValueError, match=r"both a scanned stack 'encoder/encoder' and per-layer"):
        t5x_layout.unscan(tree)
    tree = cf.random_tree(cf.tiny_mt5_shapes(), seed=5)  # unscanned: unchanged
    cf.assert_trees_bitwise_equal(t5x_layout.to_per_layer(tree), tree)


def test_relpos_per_layer_does_not_fit_a_shared_relpos_model(tmp_path):
    # scalable_t5's per-layer relative position biases have no place in the
    # T5.1.1 tree (one per stack): the error names both sides.
    per_layer = _scalable_per_layer(np.float32, seed=6, layers=2)
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_1"), cf.scan_t5x(per_layer, num_heads=HEADS))
    model = cf.unflatten({path: np.zeros(shape, np.float32)
                          for path, shape in cf.tiny_mt5_shapes().items()})
    with pytest.raises(ValueError) as info:
        load_pretrained({"t5": model}, {"mt5": ckpt})
    message = str(info.value)
    assert message.startswith(f"init.mt5: checkpoint for 't5' ({ckpt}) lacks 2 model parameters")
    assert "encoder/relpos_bias/rel_embedding, decoder/relpos_bias/rel_embedding" in message
    assert "; it has 4 parameters the model lacks: " in message
    for stack in ("encoder", "decoder"):
        for layer in (0, 1):
            assert f"{stack}/layers_{layer}/relpos_bias/rel_embedding" in message
