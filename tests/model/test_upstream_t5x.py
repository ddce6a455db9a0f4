"""Tests of model/upstream/t5x.py on checkpoints written in T5X's format."""

import gzip
import json
import os
import shutil

import numpy as np
import pytest

from model.upstream import t5x
from tests.model import upstream_files as cf

BF16 = cf.BF16


@pytest.fixture(name="bf16_params")
def fixture_bf16_params():
    return cf.random_tree(cf.tiny_mt5_shapes(), seed=1, dtype=BF16)


@pytest.fixture(name="bf16_ckpt", scope="module")
def fixture_bf16_ckpt(tmp_path_factory):
    """A T5X checkpoint of bf16_params's tree, written once for the module."""
    params = cf.random_tree(cf.tiny_mt5_shapes(), seed=1, dtype=BF16)
    return cf.write_t5x(str(tmp_path_factory.mktemp("bf16") / "checkpoint_1000"), params)


def test_bfloat16_round_trips_bitwise_from_any_path(bf16_ckpt, bf16_params):
    ckpt = bf16_ckpt
    for path in (ckpt, ckpt + "/", os.path.join(ckpt, "checkpoint")):
        cf.assert_trees_bitwise_equal(t5x.load(path, dtype=None), bf16_params)


def test_bfloat16_is_widened_exactly_to_float32(bf16_ckpt, bf16_params):
    ckpt = bf16_ckpt
    want = {k: v.astype(np.float32) for k, v in cf.flatten(bf16_params).items()}
    cf.assert_trees_bitwise_equal(t5x.load(ckpt), cf.unflatten(want))


def test_float32_round_trips_bitwise(tmp_path):
    params = cf.random_tree(cf.tiny_mt5_shapes(), seed=2)
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_7"), params)
    cf.assert_trees_bitwise_equal(t5x.load(ckpt), params)


def test_save_dtype_is_cast_by_tensorstore(tmp_path):
    params = cf.random_tree(cf.tiny_mt5_shapes(), seed=2)
    # T5X stores float32 training params as bfloat16 via tensorstore's cast driver.
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_8"), params, save_dtype=BF16)
    want = {k: v.astype(BF16) for k, v in cf.flatten(params).items()}
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None), cf.unflatten(want))


def test_legacy_uint16_bfloat16(tmp_path, bf16_params):
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_1"), bf16_params, legacy_uint16=True)
    zarray = json.load(open(os.path.join(ckpt, "target.token_embedder.embedding", ".zarray")))
    assert zarray["dtype"] == "<u2"  # the version-2 marker is really on disk
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None), bf16_params)
    loaded = t5x.load(ckpt)
    np.testing.assert_array_equal(loaded["token_embedder"]["embedding"],
                                  bf16_params["token_embedder"]["embedding"].astype(np.float32))


def test_inline_arrays_mixed_with_zarr_ones_load_bitwise(tmp_path, bf16_params):
    def inline(name, array):
        return array.ndim == 1 or "relpos" in name

    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_2"), bf16_params, inline=inline)
    assert not os.path.exists(os.path.join(ckpt, "target.encoder.encoder_norm.scale"))
    assert os.path.isdir(os.path.join(ckpt, "target.encoder.layers_0.mlp.wi_0.kernel"))
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None), bf16_params)


def test_zarr_chunk_decodes_independently(tmp_path):
    # Reads one chunk with gzip + numpy, not tensorstore, to check that the
    # loader and the writer agree with the zarr format itself.
    params = {"w": np.arange(12, dtype=np.float32).reshape(3, 4)}
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_0"), params)
    folder = os.path.join(ckpt, "target.w")
    meta = json.load(open(os.path.join(folder, ".zarray")))
    assert (meta["dtype"], meta["chunks"], meta["compressor"]["id"]) == ("<f4", [3, 2], "gzip")
    chunk = np.frombuffer(gzip.decompress(open(os.path.join(folder, "0.1"), "rb").read()),
                          "<f4").reshape(3, 2)
    np.testing.assert_array_equal(chunk, params["w"][:, 2:])
    np.testing.assert_array_equal(t5x.load(ckpt)["w"], params["w"])


def test_relative_paths_survive_moving_the_checkpoint(tmp_path, bf16_params):
    ckpt = cf.write_t5x(str(tmp_path / "a" / "checkpoint_3"), bf16_params)
    moved = str(tmp_path / "b" / "checkpoint_3")
    shutil.copytree(ckpt, moved)
    shutil.rmtree(tmp_path / "a")
    cf.assert_trees_bitwise_equal(t5x.load(moved, dtype=None), bf16_params)


def test_absolute_kvstore_paths(tmp_path, bf16_params):
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_3"), bf16_params, absolute_paths=True)
    contents = t5x.read_contents(os.path.join(ckpt, "checkpoint"))
    path = contents["optimizer"]["target"]["token_embedder"]["embedding"]["kvstore"]["path"]
    assert os.path.isabs(path)
    # Loaded through the msgpack file's path from another working directory.
    loaded = t5x.load(os.path.join(ckpt, "checkpoint"), dtype=None)
    cf.assert_trees_bitwise_equal(loaded, bf16_params)


@pytest.mark.parametrize("driver", ["gfile", "gcs"])
@pytest.mark.parametrize("path_at_top", [False, True])
def test_specs_written_elsewhere_read_locally(tmp_path, bf16_params, driver, path_at_top):
    # GCS-written checkpoints carry a dummy bucket, internal ones 'gfile', old
    # tensorstore versions the path beside the kvstore: all become local files.
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_4"), bf16_params, kvstore_driver=driver,
                        path_at_top=path_at_top)
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None), bf16_params)


def test_optimizer_state_is_never_read(tmp_path, bf16_params):
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_5"), bf16_params,
                        state=cf.adafactor_state(bf16_params))
    state_dirs = [d for d in os.listdir(ckpt) if d.startswith("state.")]
    assert any(d.endswith(".v_row") for d in state_dirs)
    for name in state_dirs:
        shutil.rmtree(os.path.join(ckpt, name))
    loaded = t5x.load(ckpt, dtype=None)
    assert "state" not in loaded and "param_states" not in loaded
    cf.assert_trees_bitwise_equal(loaded, bf16_params)


def test_missing_checkpoint_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no T5X checkpoint at .*nowhere"):
        t5x.load(str(tmp_path / "nowhere"))


def test_a_model_dir_names_its_steps(tmp_path, bf16_params):
    cf.write_t5x(str(tmp_path / "checkpoint_10"), bf16_params)
    cf.write_t5x(str(tmp_path / "checkpoint_20"), bf16_params)
    with pytest.raises(FileNotFoundError, match="checkpoint_10, checkpoint_20"):
        t5x.load(str(tmp_path))


def test_missing_zarr_array_names_the_parameter(tmp_path, bf16_params):
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_8"), bf16_params)
    shutil.rmtree(os.path.join(ckpt, "target.decoder.logits_dense.kernel"))
    with pytest.raises(FileNotFoundError, match="'decoder/logits_dense/kernel'"):
        t5x.load(ckpt)


def test_shape_disagreeing_with_zarr_is_an_error(tmp_path):
    ckpt = cf.write_t5x(str(tmp_path / "checkpoint_8"), {"w": np.ones((4, 2), np.float32)})
    meta_path = os.path.join(ckpt, "target.w", ".zarray")
    meta = json.load(open(meta_path))
    meta["shape"] = [4, 3]
    json.dump(meta, open(meta_path, "w"))
    with pytest.raises(ValueError, match="parameter 'w'"):
        t5x.load(ckpt)


def test_gcs_specs_point_at_the_bucket():
    spec = {"driver": "zarr", "dtype": "bfloat16",
            "kvstore": {"driver": "gcs", "bucket": "t5x-dummy-bucket",
                        "path": "target.encoder.encoder_norm.scale/"},
            "metadata": {"chunks": [8], "compressor": {"id": "gzip", "level": 1},
                         "shape": [8]}}
    resolved = t5x.resolve_spec(spec, "gs://t5-data/pretrained_models/t5x/mt5_base/"
                                "checkpoint_1000000", "encoder/encoder_norm/scale")
    assert resolved["kvstore"] == {
        "driver": "gcs", "bucket": "t5-data",
        "path": "pretrained_models/t5x/mt5_base/checkpoint_1000000/"
                "target.encoder.encoder_norm.scale/"}
    assert resolved["metadata"] == {"shape": [8]}
    assert spec["kvstore"]["bucket"] == "t5x-dummy-bucket"  # input left alone
    old_style = {"driver": "zarr", "kvstore": {"driver": "gcs", "bucket": "x"},
                 "path": "target.a", "metadata": {"shape": [2]}}
    assert t5x.resolve_spec(old_style, "gs://b/dir", "a")["kvstore"] == {
        "driver": "gcs", "bucket": "b", "path": "dir/target.a"}


def test_other_drivers_are_named():
    spec = {"driver": "zarr", "kvstore": {"driver": "s3", "path": "x"}, "metadata": {}}
    with pytest.raises(ValueError, match="parameter 'a/b'.*s3"):
        t5x.resolve_spec(spec, "/tmp", "a/b")
