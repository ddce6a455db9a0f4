"""Tests of model/upstream/merge.py and load_pretrained, down to a forward pass."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from model import captioner, layers
from model.upstream import big_vision, load_pretrained, merge_params
from tests.model import upstream_files as cf


def _init_tree():
    rng = np.random.default_rng(0)
    return {"img": {"embedding": {"kernel": rng.standard_normal((2, 3)).astype(np.float32)},
                    "pos_embedding": rng.standard_normal((1, 9, 3)).astype(np.float32),
                    "MAPHead_0": {"probe": np.zeros((1, 1, 3), np.float32)}},
            "img_proj": {"kernel": np.ones((3, 4), np.float32)}}


def test_an_exact_match_is_copied_cast_to_the_models_dtype(tmp_path):
    init = _init_tree()
    loaded = {"embedding": {"kernel": np.full((2, 3), 1.5, cf.BF16)},
              "pos_embedding": np.full((1, 9, 3), 2.0, np.float32),
              "MAPHead_0": {"probe": np.full((1, 1, 3), 3.0, np.float32)}}
    before = cf.flatten(init)
    params, report = merge_params(init, loaded, prefix="img")
    assert params["img"]["embedding"]["kernel"].dtype == np.float32
    np.testing.assert_array_equal(params["img"]["embedding"]["kernel"], 1.5)
    np.testing.assert_array_equal(params["img"]["MAPHead_0"]["probe"], 3.0)
    assert params["img_proj"] is init["img_proj"]  # other parts untouched
    assert all(before[k] is v for k, v in cf.flatten(init).items())  # input not modified
    assert sorted(report.loaded) == ["MAPHead_0/probe", "embedding/kernel", "pos_embedding"]
    assert not report.missing and not report.unexpected and not report.reshaped


def test_missing_is_an_error_unless_allowed_unexpected_is_ignored():
    init = _init_tree()
    loaded = {"embedding": {"kernel": np.ones((2, 3))}, "pos_embedding": np.ones((1, 9, 3))}
    with pytest.raises(ValueError, match="lacks 1 model parameters.*MAPHead_0/probe"):
        merge_params(init, loaded, prefix="img")
    for allow in (True, [r"MAPHead_0/.*"]):
        params, report = merge_params(init, loaded, prefix="img", allow_missing=allow)
        assert report.missing == ["MAPHead_0/probe"]
        assert params["img"]["MAPHead_0"]["probe"] is init["img"]["MAPHead_0"]["probe"]
    with pytest.raises(ValueError, match="lacks"):
        merge_params(init, loaded, prefix="img", allow_missing=[r"MAPHead"])  # full match
    # Unexpected parameters are reported and ignored.
    loaded.update({"MAPHead_0": {"probe": np.ones((1, 1, 3))},
                   "head": {"kernel": np.ones((3, 1000)), "bias": np.ones(1000)}})
    params, report = merge_params(init, loaded, prefix="img")
    assert report.unexpected == ["head/kernel", "head/bias"]
    assert "head" not in params["img"]


def test_missing_error_shows_what_the_checkpoint_has_instead():
    init = {"t5": {"encoder": {"relpos_bias": {"rel_embedding": np.zeros((2, 4))}}}}
    loaded = {"encoder": {f"layers_{i}": {"relpos_bias": {"rel_embedding": np.ones((2, 4))}}
                          for i in range(10)}}
    with pytest.raises(ValueError) as error:
        merge_params(init, loaded, prefix="t5")
    message = str(error.value)
    assert "lacks 1 model parameters (pass allow_missing to keep their init): " \
           "encoder/relpos_bias/rel_embedding; it has 10 parameters the model lacks: " \
           "encoder/layers_0/relpos_bias/rel_embedding, " in message
    assert message.endswith("encoder/layers_7/relpos_bias/rel_embedding, ... (2 more)")
    assert "\n" not in message


def test_shape_mismatches_are_named():
    init = _init_tree()
    loaded = {"embedding": {"kernel": np.ones((3, 3))}, "pos_embedding": np.ones((1, 9, 3)),
              "MAPHead_0": {"probe": np.ones((1, 2, 3))}}
    with pytest.raises(ValueError) as error:
        merge_params(init, loaded, prefix="img")
    message = str(error.value)
    assert "embedding/kernel: checkpoint (3, 3) vs model (2, 3)" in message
    assert "MAPHead_0/probe: checkpoint (1, 2, 3) vs model (1, 1, 3)" in message
    assert "2 shape mismatches" in message and "\n" not in message


def test_a_bad_prefix_is_named():
    with pytest.raises(ValueError, match=r"no 't5' at the top level.*'img', 'img_proj'"):
        merge_params(_init_tree(), {}, prefix="t5")


def _old_posemb():
    """(init tree, a 3x3 posemb with a class row, cls) of a ViT of a 4x4 grid with a cls."""
    rng = np.random.default_rng(1)
    init = {"pos_embedding": np.zeros((1, 16, 3), np.float32),
            "cls": np.zeros((1, 1, 3), np.float32)}
    old_posemb = rng.standard_normal((1, 10, 3)).astype(np.float32)  # 3x3 + class row
    cls = rng.standard_normal((1, 1, 3)).astype(np.float32)
    return init, old_posemb, cls


def test_an_old_posemb_is_resampled_with_its_class_row_folded_into_cls():
    init, old_posemb, cls = _old_posemb()
    params, report = merge_params({"img": init}, {"pos_embedding": old_posemb, "cls": cls},
                                  prefix="img")
    np.testing.assert_array_equal(params["img"]["pos_embedding"],
                                  big_vision.resample_posemb(old_posemb[:, 1:], 4))
    np.testing.assert_allclose(params["img"]["cls"], cls + old_posemb[:, :1])
    assert report.reshaped[0] == ("pos_embedding", (1, 10, 3), (1, 16, 3),
                                  "resampled grid 3x3 -> 4x4, class-token row dropped")
    assert report.reshaped[1][0] == "cls"


def test_boxed_abstract_leaves_keep_their_boxes():
    box = nn.LogicallyPartitioned(jax.ShapeDtypeStruct((2, 3), jnp.float32), ("embed", "mlp"))
    params, _ = merge_params({"t5": {"w": box}}, {"w": np.ones((2, 3), cf.BF16)}, prefix="t5")
    leaf = params["t5"]["w"]
    assert isinstance(leaf, nn.LogicallyPartitioned) and leaf.names == ("embed", "mlp")
    assert leaf.value.dtype == np.float32 and np.all(leaf.value == 1)


def test_report_str():
    init = _init_tree()
    loaded = {"embedding": {"kernel": np.ones((2, 3))}, "pos_embedding": np.ones((1, 4, 3)),
              "head": {"kernel": np.ones((3, 2))}}
    _, report = merge_params(init, loaded, prefix="img", allow_missing=True, source="x.npz")
    assert str(report).splitlines() == [
        "[img] loaded 2 arrays from x.npz",
        "  missing (kept from init): 1", "    MAPHead_0/probe",
        "  unexpected (in the checkpoint, ignored): 1", "    head/kernel",
        "  reshaped: 1", "    pos_embedding: (1, 4, 3) -> (1, 9, 3) (resampled grid 2x2 -> 3x3)"]


def test_load_pretrained_skips_empty_fields():
    init = _init_tree()
    config = ml_collections.ConfigDict(dict(mt5="", vit=None, checkpoint=""))
    params, reports = load_pretrained(init, config)
    assert params is init and reports == []


def test_load_pretrained_names_a_missing_t5x_checkpoint(tmp_path):
    init = _init_tree()
    config = ml_collections.ConfigDict(dict(mt5="", vit=None, checkpoint=""))
    config.mt5 = str(tmp_path / "mt5_base" / "checkpoint_1000000")
    with pytest.raises(FileNotFoundError, match="init.mt5: no T5X checkpoint at .*mt5_base"):
        load_pretrained(init, config)


def test_load_pretrained_names_a_missing_big_vision_file(tmp_path):
    init = _init_tree()
    config = ml_collections.ConfigDict(dict(mt5="", vit=None, checkpoint=""))
    config.mt5, config.vit = "", str(tmp_path / "ViT-B_16.npz")
    with pytest.raises(FileNotFoundError, match="init.vit: no big_vision .npz at .*ViT-B_16"):
        load_pretrained(init, config)


# A tiny captioner: ViT mu/4 with MAP pooling on 16px images (4x4 patch grid)
# and a 2+2-layer mT5-like model; the shapes of upstream_files' tiny trees.
def _model_config(scan=False):
    return ml_collections.ConfigDict(dict(
        image_size=16, scan=scan,
        vit=dict(variant="mu/4", pool="map", width=8, depth=2, mlp_dim=16, num_heads=2),
        t5=dict(variant="t5-tiny", emb_dim=8, num_heads=2, head_dim=4, mlp_dim=12,
                num_encoder_layers=2, num_decoder_layers=2, vocab_size=40)))


@pytest.fixture(name="pretrained", scope="module")
def fixture_pretrained(tmp_path_factory):
    """Public-style checkpoints: bf16 T5X mT5 and an old-release ViT at 3x3."""
    root = tmp_path_factory.mktemp("pretrained")
    mt5 = cf.random_tree(cf.tiny_mt5_shapes(), seed=5, dtype=cf.BF16)
    mt5_path = cf.write_t5x(str(root / "mt5" / "checkpoint_1000000"), mt5,
                            state=cf.adafactor_state(mt5))
    vit = cf.random_tree(cf.tiny_vit_shapes(grid=3, map_head=False, cls=True, classifier=7), seed=6)
    flat = cf.flatten(vit)
    class_row = np.full((1, 1, 8), 0.5, np.float32)
    flat["Transformer/posembed_input/pos_embedding"] = np.concatenate(
        [class_row, flat.pop("pos_embedding")], axis=1)
    vit_path = cf.write_npz(str(root / "vit.npz"), cf.unflatten(flat))
    return dict(mt5=mt5, mt5_path=mt5_path, vit=vit, vit_path=vit_path)


def _inputs():
    rng = np.random.default_rng(0)
    images = jnp.asarray(rng.uniform(-1, 1, (2, 16, 16, 3)), jnp.float32)
    prompt = jnp.asarray([[5, 6, 1, 0], [7, 1, 0, 0]], jnp.int32)
    targets = jnp.asarray([[0, 3, 4, 9, 1], [0, 8, 2, 1, 0]], jnp.int32)
    return images, prompt, targets


def _random_init(model, seed=0):
    """Random params shaped by jax.eval_shape(model.init) (eager init is slow)."""
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda s: (0.1 * rng.standard_normal(s.shape)).astype(s.dtype),
        captioner.abstract_params(model, boxed=True))


def _expected_params(init, pretrained):
    """The tree that loading must produce, built without the loaders."""
    expected = jax.tree_util.tree_map(np.asarray, nn.unbox(init))
    expected["t5"] = jax.tree_util.tree_map(lambda x: x.astype(np.float32), pretrained["mt5"])
    vit = {k: v for k, v in pretrained["vit"].items() if k not in ("cls", "head")}
    vit["pos_embedding"] = big_vision.resample_posemb(pretrained["vit"]["pos_embedding"], 4)
    vit["MAPHead_0"] = expected["img"]["MAPHead_0"]  # not in the checkpoint: init kept
    expected["img"] = vit
    return expected


def test_captioner_runs_on_loaded_weights(pretrained):
    model = captioner.from_config(_model_config())
    init = _random_init(model)
    apply = jax.jit(model.apply)
    config = ml_collections.ConfigDict(dict(mt5=pretrained["mt5_path"],
                                            vit=pretrained["vit_path"], checkpoint=""))
    params, reports = load_pretrained(init, config)
    t5_report, vit_report = reports
    assert len(t5_report.loaded) == len(cf.tiny_mt5_shapes()) and not t5_report.missing
    assert not t5_report.unexpected
    assert sorted(vit_report.unexpected) == ["cls", "head/bias", "head/kernel"]
    assert vit_report.missing and all(p.startswith("MAPHead_0/") for p in vit_report.missing)
    assert vit_report.reshaped == [("pos_embedding", (1, 10, 8), (1, 16, 8),
                                    "resampled grid 3x3 -> 4x4, class-token row dropped")]
    assert isinstance(params["t5"]["token_embedder"]["embedding"], nn.LogicallyPartitioned)

    expected = _expected_params(init, pretrained)
    got = nn.unbox(params)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(got),
                            jax.tree_util.tree_leaves(expected), strict=True):
        np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))

    logits = apply({"params": got}, *_inputs())
    assert logits.shape == (2, 5, 40) and bool(jnp.all(jnp.isfinite(logits)))
    np.testing.assert_allclose(logits, apply({"params": expected}, *_inputs()),
                               rtol=1e-6, atol=1e-6)
    init_logits = apply({"params": nn.unbox(init)}, *_inputs())
    assert not np.allclose(logits, init_logits, atol=1e-3)


def test_scanned_captioner_gets_the_same_weights(pretrained):
    config = ml_collections.ConfigDict(dict(mt5=pretrained["mt5_path"], vit=pretrained["vit_path"]))
    loaded = {}
    for scan in (False, True):
        model = captioner.from_config(_model_config(scan=scan))
        params, reports = load_pretrained(_random_init(model), config)
        assert not reports[0].missing and not reports[0].unexpected
        assert reports[1].reshaped[0][0] == "pos_embedding"
        loaded[scan] = nn.unbox(params)
    stacked = loaded[True]["t5"]["encoder"]["layers"]["mlp"]["wi_0"]["kernel"]
    assert isinstance(stacked, np.ndarray) and stacked.shape == (2, 8, 12)
    np.testing.assert_array_equal(
        stacked[1], pretrained["mt5"]["encoder"]["layers_1"]["mlp"]["wi_0"]["kernel"]
        .astype(np.float32))
    # Same weights once unstacked (MAPHead_0 is each model's own random init).
    unstacked = layers.scan_to_layers(loaded[True])
    for part in ("t5", "img"):
        want = cf.flatten(loaded[False][part])
        got = {k: np.asarray(v) for k, v in cf.flatten(unstacked[part]).items()}
        assert sorted(got) == sorted(want)
        for path in want:
            if not path.startswith("MAPHead_0/"):
                np.testing.assert_array_equal(got[path], want[path], err_msg=path)
