"""Tests of model/upstream/t5x.py on T5X checkpoints saved with Orbax, and its refusals."""

import glob
import json
import os
import shutil

import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import serialization

from model.upstream import load_pretrained, t5x
from tests.model import upstream_files as cf

BF16 = cf.BF16


def _params(dtype, seed=1):
    return cf.random_tree(cf.tiny_mt5_shapes(), seed=seed, dtype=dtype)


def _optimizer_state(params):
    return {"param_states": cf.adafactor_state(params)["param_states"]}


@pytest.fixture(name="orbax_ckpt", scope="module")
def fixture_orbax_ckpt(tmp_path_factory):
    """A bf16 T5X model directory saved by the Orbax manager, with its Adafactor state."""
    params = _params(BF16)
    model_dir = str(tmp_path_factory.mktemp("orbax") / "model")
    step_dir = cf.write_t5x_orbax(model_dir, 1000, params, state=_optimizer_state(params))
    return params, model_dir, step_dir


def test_orbax_layout_is_t5x_s(orbax_ckpt):
    _, model_dir, step_dir = orbax_ckpt
    assert os.listdir(model_dir) == ["checkpoint_1000"]
    assert {"_CHECKPOINT_METADATA", "state", "dataset"} <= set(os.listdir(step_dir))
    state = os.path.join(step_dir, "state")
    assert {"_METADATA", "manifest.ocdbt", "d", "ocdbt.process_0"} <= set(os.listdir(state))
    with open(os.path.join(state, "_METADATA")) as f:
        keys = {entry["key_metadata"][0]["key"] for entry in json.load(f)["tree_metadata"].values()}
    assert keys == {"target", "state"}


def test_orbax_bfloat16_is_bitwise_from_any_path(orbax_ckpt):
    params, _, step_dir = orbax_ckpt
    state = os.path.join(step_dir, "state")
    for path in (step_dir, step_dir + "/", state, os.path.join(state, "_METADATA")):
        cf.assert_trees_bitwise_equal(t5x.load(path, dtype=None), params)
    want = {k: v.astype(np.float32) for k, v in cf.flatten(params).items()}
    cf.assert_trees_bitwise_equal(t5x.load(step_dir), cf.unflatten(want))


@pytest.mark.parametrize("use_ocdbt", [True, False])
def test_orbax_float32_is_bitwise(tmp_path, use_ocdbt):
    params = _params(np.float32, seed=2)
    step_dir = cf.write_t5x_orbax(str(tmp_path), 7, params, use_ocdbt=use_ocdbt)
    cf.assert_trees_bitwise_equal(t5x.load(step_dir), params)


def test_orbax_optimizer_state_is_never_read(tmp_path):
    # Without OCDBT each array has its own folder: deleting the state's
    # folders shows that only `target` is opened.
    params = _params(BF16, seed=3)
    step_dir = cf.write_t5x_orbax(str(tmp_path), 5, params, state=_optimizer_state(params),
                                  use_ocdbt=False)
    state_dirs = glob.glob(os.path.join(step_dir, "state", "state.*"))
    assert any(d.endswith(".v_row") for d in state_dirs)
    for folder in state_dirs:
        shutil.rmtree(folder)
    cf.assert_trees_bitwise_equal(t5x.load(step_dir, dtype=None), params)


def test_orbax_before_metadata_placeholders(tmp_path):
    params = _params(BF16, seed=4)
    ckpt = cf.write_t5x_orbax_aggregate(str(tmp_path / "checkpoint_9"), params,
                                        state=_optimizer_state(params))
    for folder in glob.glob(os.path.join(ckpt, "state", "state.*")):
        shutil.rmtree(folder)
    cf.assert_trees_bitwise_equal(t5x.load(ckpt, dtype=None), params)


def test_load_pretrained_reads_orbax(orbax_ckpt):
    params, model_dir, step_dir = orbax_ckpt
    init = {"t5": cf.unflatten({k: np.zeros(v.shape, np.float32)
                                for k, v in cf.flatten(params).items()})}
    merged, (report,) = load_pretrained(init, {"mt5": step_dir})
    assert not report.missing and not report.unexpected
    np.testing.assert_array_equal(merged["t5"]["decoder"]["logits_dense"]["kernel"],
                                  params["decoder"]["logits_dense"]["kernel"].astype(np.float32))


def test_load_pretrained_names_what_it_cannot_read_in_one_line(tmp_path, orbax_ckpt):
    _, model_dir, _ = orbax_ckpt
    for path in (model_dir, str(tmp_path / "nope")):  # messages in one line
        with pytest.raises(FileNotFoundError) as info:
            load_pretrained({"t5": {}}, {"mt5": path})
        message = str(info.value)
        assert message.startswith("init.mt5: ") and path in message and "\n" not in message


# ------------------------------------------------------------- refusals ----
def test_a_model_dir_is_named_with_its_steps(orbax_ckpt):
    _, model_dir, _ = orbax_ckpt
    with pytest.raises(FileNotFoundError, match="is a T5X model directory.*: checkpoint_1000$"):
        t5x.load(model_dir)


def test_an_unfinished_save_is_named(tmp_path, orbax_ckpt):
    _, _, step_dir = orbax_ckpt
    tmp = str(tmp_path / "checkpoint_1000.orbax-checkpoint-tmp-1234")
    shutil.copytree(step_dir, tmp)
    with pytest.raises(FileNotFoundError, match="tmp-1234 is an unfinished Orbax save"):
        t5x.load(tmp)


def _without_metadata(tmp_path, step_dir):
    copy = str(tmp_path / "checkpoint_1000")
    shutil.copytree(step_dir, copy)
    os.remove(os.path.join(copy, "state", "_METADATA"))
    return copy


def test_missing_metadata_is_named(tmp_path, orbax_ckpt):
    _, _, step_dir = orbax_ckpt
    copy = _without_metadata(tmp_path, step_dir)
    with pytest.raises(FileNotFoundError, match=r"checkpoint_1000 is an Orbax T5X checkpoint "
                       r"whose `state/` has no `_METADATA`: it holds Orbax OCDBT data"):
        t5x.load(copy)


def test_bad_metadata_is_named(tmp_path, orbax_ckpt):
    _, _, step_dir = orbax_ckpt
    copy = _without_metadata(tmp_path, step_dir)
    with open(os.path.join(copy, "state", "_METADATA"), "w") as f:
        f.write("{not json")
    with pytest.raises(ValueError, match="state is an Orbax checkpoint whose `_METADATA` cannot"):
        t5x.load(copy)


def test_missing_ocdbt_data_names_the_checkpoint(tmp_path):
    # Random (incompressible) data big enough to live outside the OCDBT manifest.
    params = {"w": np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)}
    step_dir = cf.write_t5x_orbax(str(tmp_path), 3, params)
    for data_file in glob.glob(os.path.join(step_dir, "state", "ocdbt.process_0", "d", "*")):
        os.remove(data_file)
    with pytest.raises(ValueError, match=r"state: cannot read the Orbax checkpoint's `target`"):
        t5x.load(step_dir)


def test_orbax_checkpoint_of_another_tree(tmp_path):
    # This repository's own checkpoints: an Orbax step whose item is `default`.
    manager = ocp.CheckpointManager(str(tmp_path / "checkpoints"))
    manager.save(300, args=ocp.args.StandardSave({"params": {"w": np.ones(3, np.float32)},
                                                  "step": np.asarray(300)}))
    manager.wait_until_finished()
    manager.close()
    step_dir = str(tmp_path / "checkpoints" / "300")
    with pytest.raises(FileNotFoundError,
                       match=r"300 is not a T5X checkpoint.*Orbax checkpoint step with the items "
                             r"\['default'\]"):
        t5x.load(step_dir)
    with pytest.raises(ValueError, match=r"without T5X's `target` parameter tree \(top-level "
                       r"keys: \['params', 'step'\]\).*use init.checkpoint"):
        t5x.load(os.path.join(step_dir, "default"))


def test_placeholders_in_an_ocdbt_folder(tmp_path):
    ckpt = tmp_path / "checkpoint_2"
    (ckpt / "state").mkdir(parents=True)
    (ckpt / "state" / "manifest.ocdbt").write_bytes(b"")
    (ckpt / "state" / "checkpoint").write_bytes(serialization.msgpack_serialize(
        {"target": {"w": "PLACEHOLDER://target.w"}}))
    with pytest.raises(ValueError, match=r"state is an Orbax OCDBT checkpoint without `_METADATA` "
                       r"\(parameter 'w'"):
        t5x.load(str(ckpt))


NOT_T5X = "checkpoint_1/checkpoint is not a T5X checkpoint: "


@pytest.mark.parametrize("content, message", [
    (b"model_checkpoint_path: \"model.ckpt-0\"",
     NOT_T5X + "it is a TensorFlow `checkpoint` index file"),
    (b"\x89HDF\r\n\x1a\n\0\0", NOT_T5X + "it is an HDF5 file"),
    (b"\x93NUMPY\x01\x00", NOT_T5X + "it is a single NumPy array"),
    (b"", NOT_T5X + "it is an empty file"),
    (b"\xc1 definitely not msgpack", NOT_T5X + "not a msgpack file"),
    (serialization.msgpack_serialize({"version": 3}), "no `optimizer/target`"),
    (serialization.msgpack_serialize({"version": 3, "optimizer": {"target": {"a": {"b": "oops"}}}}),
     "parameter 'a/b' is not an array but str 'oops'"),
], ids=["tf_index", "hdf5", "numpy", "empty", "not_msgpack", "no_target", "string_leaf"])
def test_other_formats_are_named_by_what_they_hold(tmp_path, content, message):
    ckpt = tmp_path / "checkpoint_1"
    ckpt.mkdir()
    (ckpt / "checkpoint").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        t5x.load(str(ckpt))


def test_folder_of_something_else(tmp_path):
    (tmp_path / "vit.npz").write_bytes(b"PK\x03\x04")
    with pytest.raises(FileNotFoundError, match="is not a T5X checkpoint: no `checkpoint` file "
                       "and no Orbax `_METADATA`.*a folder of .npz files"):
        t5x.load(str(tmp_path))
