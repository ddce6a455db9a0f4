"""Tests of a fresh run's pretrained weights (training/pretrained.py) from Hugging Face and timm
folders: `train.py --config configs/bb.py:smoke --config.init.mt5=<folder>
--config.init.vit=<folder>` starts from exactly their weights; another model stops it in one line.
"""

import os

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file

from data import tokenizer
from model import captioner, layers
from model.upstream import hugging_face, trees
from tests import tiny
from tests.model import upstream_files as cf
from training import pretrained

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# configs/common.smoke's towers: mT5 32 wide, 2 heads of 16, MLP 64, 1+1 layers; ViT B/16 32 wide,
# depth 1, MLP 64, 2 heads, on 32 px images (a 2x2 grid and [cls]).


def _smoke_mt5(vocab_size, emb_dim=32):
    torch.manual_seed(0)
    config = transformers.MT5Config(
        vocab_size=vocab_size, d_model=emb_dim, d_kv=16, num_heads=2, d_ff=64, num_layers=1,
        num_decoder_layers=1, feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    model = transformers.MT5ForConditionalGeneration(config)
    model.lm_head.weight = torch.nn.Parameter(torch.randn_like(model.lm_head.weight))
    return model


@pytest.fixture(name="folders", scope="module")
def fixture_folders(tiny_demo, tmp_path_factory):
    """Folders of the smoke towers: mT5 as one file and as shards, timm ViT, a wider mT5."""
    root = tmp_path_factory.mktemp("hf_smoke")
    vocab_size = captioner.padded_vocab_size(
        tokenizer.get_vocabulary(f"{tiny_demo}/spm/demo.model").vocab_size)
    mt5 = _smoke_mt5(vocab_size)
    mt5.save_pretrained(str(root / "mt5"))
    mt5.save_pretrained(str(root / "mt5_sharded"), max_shard_size="100KB")
    _smoke_mt5(vocab_size, emb_dim=48).save_pretrained(str(root / "mt5_wide"))
    torch.manual_seed(1)
    vit = transformers.ViTModel(transformers.ViTConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        image_size=32, patch_size=16), add_pooling_layer=False)
    vit.save_pretrained(str(root / "hf_vit"))
    state = cf.timm_vit_state(load_file(str(root / "hf_vit" / "model.safetensors")), depth=1)
    cf.write_timm_vit(str(root / "timm"), state, width=32, depth=1, heads=2, mlp=64, patch=16,
                      image_size=32)
    return root


def _args(tiny_demo, mt5, vit, *more):
    return [f"--config.vocab.path={tiny_demo}/spm/demo.model",
            f"--config.data.manual_dir={tiny_demo}/coco35l",
            f"--config.evals.xm3600.data_dir={tiny_demo}/xm3600",
            f"--config.evals.coco_dev.manual_dir={tiny_demo}/coco35l",
            f"--config.init.mt5={mt5}", f"--config.init.vit={vit}", *more]


def _stored(folder):
    """{name: array} of every safetensors file in `folder` (one file or the shards)."""
    stored = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".safetensors"):
            stored.update(load_file(os.path.join(folder, name)))
    return stored


def _expected_vit(folder):
    """The timm folder's weights as the reader gives them, the [cls] row of the position
    embedding added into [cls] (the captioner adds no position to [cls])."""
    tree, _ = hugging_face.read(str(folder))
    flat = {path: np.asarray(value) for path, value in trees.flatten_tree(tree).items()}
    flat["cls"] = flat["cls"] + flat["pos_embedding"][:, :1]
    flat["pos_embedding"] = flat["pos_embedding"][:, 1:]
    return flat


@pytest.mark.parametrize("mt5", ["mt5", "mt5_sharded"])
def test_bb_smoke_starts_from_the_folders_weights(mt5, folders, tiny_demo, tmp_path,
                                                  monkeypatch):
    initialized, initialize = [], pretrained.initialize

    def keep_a_copy(*args):  # On the host: training donates the device arrays.
        params = initialize(*args)
        initialized.append(jax.device_get(params))
        return params

    monkeypatch.setattr(pretrained, "initialize", keep_a_copy)
    result = tiny.train_main("configs/bb.py:smoke", tmp_path / "run", *_args(
        tiny_demo, folders / mt5, folders / "timm", "--config.total_steps=1",
        "--config.evals.xm3600.every=0", "--config.evals.coco_dev.every=0"))
    assert result.returncode == 0, result.stderr[-3000:]
    params = layers.scan_to_layers(initialized[0])
    # mT5 mapped back to Hugging Face's names by the tests' own mapping (upstream_files,
    # checked against transformers in test_hf_crosscheck), not by the reader.
    as_hf = cf.hf_mt5_state(jax.tree.map(np.asarray, params["t5"]), num_layers=1)
    stored = _stored(folders / mt5)
    assert sorted(as_hf) == sorted(stored)
    for name, value in as_hf.items():
        np.testing.assert_array_equal(value, stored[name], err_msg=name)
    got = trees.flatten_tree(params["img"])
    for path, want in _expected_vit(folders / "timm").items():
        np.testing.assert_array_equal(np.asarray(got[path]), want, err_msg=path)


def _one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def test_a_folder_of_another_width_stops_train_in_one_line(folders, tiny_demo, tmp_path):
    result = tiny.train_main("configs/bb.py:smoke", tmp_path / "run", *_args(
        tiny_demo, folders / "mt5_wide", folders / "timm"))
    line = _one_error_line(result)
    assert line.startswith(f"error: init.mt5: checkpoint for 't5' ({folders}/mt5_wide "
                           "(Hugging Face mT5 (width 48), 1+1 layers, safetensors, 1 file))")
    assert "token_embedder/embedding: checkpoint (" in line


def test_check_names_the_layout_it_recognised(folders, tiny_demo):
    result = tiny.train_main("configs/bb.py:smoke", "", "--check", *_args(
        tiny_demo, folders / "mt5_sharded", folders / "timm"))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert (f"  ok       pretrained config.init.mt5 {folders}/mt5_sharded (Hugging Face mT5 "
            f"(width 32), 1+1 layers, safetensors, ") in result.stdout
    assert " shards): its shapes fit the model" in result.stdout
    assert (f"  ok       pretrained config.init.vit {folders}/timm (timm ViT (width 32, patch 16) "
            "vit_base_patch16_224.augreg_in21k, 1 layers, safetensors, 1 file): its shapes fit "
            "the model") in result.stdout


def test_check_refuses_a_folder_of_another_width_in_one_line(folders, tiny_demo):
    result = tiny.train_main("configs/bb.py:smoke", "", "--check", *_args(
        tiny_demo, folders / "mt5_wide", folders / "timm"))
    assert result.returncode == 2, result.stdout + result.stderr[-3000:]
    missing = [line for line in result.stdout.splitlines() if line.startswith("  MISSING  ")]
    assert len(missing) == 1 and missing[0].startswith(
        "  MISSING  pretrained config.init.mt5: init.mt5: checkpoint for 't5' "), result.stdout
    assert "(Hugging Face mT5 (width 48), 1+1 layers" in missing[0]

