"""Tests of the Hugging Face / timm safetensors reader (model/upstream/hugging_face.py): folders
written by transformers' own `save_pretrained` (and timm's layout by safetensors' `save_file`)
load through `config.init` and give the library's forward passes within 1e-4."""

import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from model import layers, t5, vit
from model.upstream import hugging_face, load_pretrained
from tests.model import upstream_files as cf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ATOL = 1e-4
T5_CONFIG = t5.t5_config("t5-tiny", num_heads=4, head_dim=8, emb_dim=32, mlp_dim=64,
                         num_encoder_layers=2, num_decoder_layers=2, vocab_size=128)
VIT_CONFIG = vit.vit_config("mu/8", pool="tok", width=32, depth=2, mlp_dim=64, num_heads=2)


def _hf_mt5(emb_dim=32, seed=0):
    """A random MT5ForConditionalGeneration of T5_CONFIG's sizes with its own lm_head."""
    torch.manual_seed(seed)
    config = transformers.MT5Config(
        vocab_size=128, d_model=emb_dim, d_kv=8, num_heads=4, d_ff=64, num_layers=2,
        num_decoder_layers=2, dropout_rate=0.0, layer_norm_epsilon=1e-6,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, pad_token_id=0,
        eos_token_id=1, decoder_start_token_id=0)
    model = transformers.MT5ForConditionalGeneration(config).eval()
    # transformers 5 ties lm_head to shared.weight whatever the config says; mT5's is its own.
    model.lm_head.weight = torch.nn.Parameter(torch.randn_like(model.lm_head.weight))
    return model


def _hf_vit(seed=0):
    """A random ViTModel of VIT_CONFIG's sizes (tanh GELU and eps 1e-6, as big_vision's ViT)."""
    torch.manual_seed(seed)
    config = transformers.ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        image_size=32, patch_size=8, layer_norm_eps=1e-6, hidden_act="gelu_pytorch_tanh",
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.ViTModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():  # HF initializes [cls] and the position embeddings small.
        model.embeddings.cls_token.normal_()
        model.embeddings.position_embeddings.normal_()
    return model


@pytest.fixture(name="mt5_folder", scope="module")
def fixture_mt5_folder(tmp_path_factory):
    """(model, folder) of a random MT5ForConditionalGeneration saved by save_pretrained."""
    model = _hf_mt5()
    folder = str(tmp_path_factory.mktemp("hf") / "mt5")
    model.save_pretrained(folder)
    return model, folder


@pytest.fixture(name="vit_folder", scope="module")
def fixture_vit_folder(tmp_path_factory):
    model = _hf_vit()
    folder = str(tmp_path_factory.mktemp("hf") / "vit")
    model.save_pretrained(folder)
    return model, folder


def _t5_params(path):
    """T5_CONFIG's parameters with init.mt5 = `path`."""
    model = t5.T5(T5_CONFIG)
    abstract = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 2, 32)),
                              jnp.ones((1, 2), bool), jnp.zeros((1, 2), jnp.int32))["params"]
    params, _ = load_pretrained({"t5": layers.random_params(abstract)},
                                ml_collections.ConfigDict({"mt5": path}))
    return params["t5"]


def _vit_params(path):
    images = np.zeros((1, 32, 32, 3), np.float32)
    abstract = jax.eval_shape(vit.ViT(VIT_CONFIG).init, jax.random.key(0), images)["params"]
    params, _ = load_pretrained({"img": layers.random_params(abstract)},
                                ml_collections.ConfigDict({"vit": path}))
    return params["img"]


def test_mt5_folder_gives_transformers_forward_pass(mt5_folder):
    hf, folder = mt5_folder
    model, params = t5.T5(T5_CONFIG), _t5_params(folder)
    rng = np.random.default_rng(0)
    # Padded: 12 encoder positions reach T5's logarithmic buckets, two rows end in padding.
    enc_tokens = rng.integers(2, 128, size=(3, 12)).astype(np.int32)
    enc_tokens[0, 7:] = 0
    enc_tokens[1, 10:] = 0
    dec_tokens = rng.integers(2, 128, size=(3, 9)).astype(np.int32)
    dec_tokens[:, 0] = 0

    def run(p, enc, dec):
        def encode(m, tokens):
            mask = tokens != 0
            return m.encode(m.embed(tokens), mask), mask
        encoded, mask = model.apply({"params": p}, enc, method=encode)
        return encoded, model.apply({"params": p}, encoded, mask, dec, method="decode")

    encoded, logits = jax.jit(run)(params, enc_tokens, dec_tokens)
    cf.assert_mt5_matches_transformers(hf, enc_tokens, dec_tokens, encoded, logits, atol=ATOL)


def _images():
    return np.random.default_rng(2).uniform(-1, 1, (2, 32, 32, 3)).astype(np.float32)


def _assert_vit_matches(params, hf):
    images = _images()
    pooled, tokens = jax.jit(lambda p: vit.ViT(VIT_CONFIG).apply({"params": p}, images))(params)
    with torch.no_grad():
        hidden = hf(pixel_values=torch.from_numpy(images.transpose(0, 3, 1, 2)))
    hidden = hidden.last_hidden_state.numpy()
    np.testing.assert_allclose(tokens, hidden[:, 1:], atol=ATOL)
    np.testing.assert_allclose(pooled, hidden[:, 0], atol=ATOL)  # [cls], its position added
    assert float(np.std(tokens)) > 0.1


def test_vit_folder_gives_transformers_forward_pass(vit_folder):
    hf, folder = vit_folder
    _assert_vit_matches(_vit_params(folder), hf)


def _timm_folder(vit_folder, folder):
    """The same weights as `vit_folder` in a timm folder (timm's names, config.json)."""
    hf_state = load_file(os.path.join(vit_folder, "model.safetensors"))
    return cf.write_timm_vit(folder, cf.timm_vit_state(hf_state, depth=2), width=32, depth=2,
                             heads=2, mlp=64, patch=8, image_size=32)


def test_timm_folder_gives_the_same_vits_forward_pass(vit_folder, tmp_path):
    hf, folder = vit_folder
    _assert_vit_matches(_vit_params(_timm_folder(folder, str(tmp_path / "timm"))), hf)


def test_a_hugging_face_folder_gives_the_t5x_checkpoints_tree_bitwise(tmp_path):
    shapes = cf.tiny_mt5_shapes(vocab=128, emb=32, heads=4, head_dim=8, mlp=64, layers=2)
    tree = cf.random_tree(shapes, seed=7)
    t5x_path = cf.write_t5x(str(tmp_path / "t5x" / "checkpoint_1000000"), tree)
    hf_folder = tmp_path / "hf"
    hf_folder.mkdir()
    save_file(cf.hf_mt5_state(tree, num_layers=2), str(hf_folder / "model.safetensors"))
    from_t5x, from_hf = _t5_params(t5x_path), _t5_params(str(hf_folder))
    cf.assert_trees_bitwise_equal(from_hf, from_t5x)
    cf.assert_trees_bitwise_equal(from_t5x, tree)  # The weights written, not the init.


def test_sharded_save_reads_as_the_single_file(mt5_folder, tmp_path):
    hf, folder = mt5_folder
    hf.save_pretrained(str(tmp_path / "sharded"), max_shard_size="40KB")
    assert os.path.isfile(tmp_path / "sharded" / hugging_face.INDEX)
    _, what = hugging_face.read(str(tmp_path / "sharded"))
    assert what.startswith("Hugging Face mT5 (width 32), 2+2 layers, safetensors, ")
    assert what.endswith(" shards") and not what.endswith(" 1 shards")
    cf.assert_trees_bitwise_equal(_t5_params(str(tmp_path / "sharded")), _t5_params(folder))


def _cache(folder, root):
    """`folder` as the Hugging Face cache keeps a download: models--org--name/ with
    blobs/<hash> files, links to them in snapshots/<commit>/, refs/main naming the commit."""
    repo = root / "models--google--mt5-tiny"
    commit = "0123456789abcdef0123456789abcdef01234567"
    for sub in ("blobs", f"snapshots/{commit}", "refs"):
        (repo / sub).mkdir(parents=True)
    for i, name in enumerate(sorted(os.listdir(folder))):
        blob = repo / "blobs" / f"blob{i}"
        blob.write_bytes(open(os.path.join(folder, name), "rb").read())
        os.symlink(f"../../blobs/blob{i}", repo / "snapshots" / commit / name)
    (repo / "refs" / "main").write_text(commit)
    return repo, repo / "snapshots" / commit


def test_a_cache_snapshot_reads_as_the_folder(mt5_folder, tmp_path):
    _, folder = mt5_folder
    _, snapshot = _cache(folder, tmp_path)
    cf.assert_trees_bitwise_equal(_t5_params(str(snapshot)), _t5_params(folder))


def test_a_cache_folder_reads_as_the_folder(mt5_folder, tmp_path):
    _, folder = mt5_folder
    repo, _ = _cache(folder, tmp_path)
    cf.assert_trees_bitwise_equal(_t5_params(str(repo)), _t5_params(folder))


def test_file_url_reads_as_the_path(vit_folder):
    _, folder = vit_folder
    cf.assert_trees_bitwise_equal(_vit_params(f"file://{folder}"), _vit_params(folder))


def _refusal(field, path, params):
    with pytest.raises(ValueError) as error:
        load_pretrained(params, ml_collections.ConfigDict({field: path}))
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"init.{field}: "), message
    return message


def test_a_wrong_variant_is_one_line_naming_both_shapes(tmp_path):
    folder = str(tmp_path / "mt5_wide")
    _hf_mt5(emb_dim=48).save_pretrained(folder)
    model = t5.T5(T5_CONFIG)
    abstract = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 2, 32)),
                              jnp.ones((1, 2), bool), jnp.zeros((1, 2), jnp.int32))["params"]
    message = _refusal("mt5", folder, {"t5": abstract})
    assert f"({folder} (Hugging Face mT5 (width 48), 2+2 layers, safetensors, 1 file))" in message
    assert "token_embedder/embedding: checkpoint (128, 48) vs model (128, 32)" in message


def test_a_non_model_safetensors_file_is_one_line(tmp_path):
    path = str(tmp_path / "adapter.safetensors")
    save_file({"lora_A.weight": np.ones((2, 3), np.float32)}, path)
    message = _refusal("vit", path, {"img": {"cls": np.zeros((1, 1, 3), np.float32)}})
    assert message == (f"init.vit: {path} is safetensors (1 file) of 1 tensors (lora_A.weight) "
                       "in none of the layouts read here: Hugging Face mT5 or ViT, timm ViT "
                       "(docs/models.md)")


def test_a_mismatch_is_refused_before_any_tensor_is_read(tmp_path, monkeypatch):
    folder = str(tmp_path / "mt5_wide")
    _hf_mt5(emb_dim=48).save_pretrained(folder)
    read = []
    monkeypatch.setattr(hugging_face, "_read", lambda *args: read.append(args))
    model = t5.T5(T5_CONFIG)
    abstract = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 2, 32)),
                              jnp.ones((1, 2), bool), jnp.zeros((1, 2), jnp.int32))["params"]
    _refusal("mt5", folder, {"t5": abstract})
    assert read == []


def test_an_encoder_model_leaves_the_decoder_at_its_init(mt5_folder, tmp_path):
    hf, _ = mt5_folder
    encoder = transformers.MT5EncoderModel(hf.config)
    encoder.load_state_dict(hf.encoder.state_dict(), strict=False)
    encoder.shared.weight = hf.shared.weight
    encoder.save_pretrained(str(tmp_path / "encoder"))
    model = t5.T5(T5_CONFIG)
    abstract = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 2, 32)),
                              jnp.ones((1, 2), bool), jnp.zeros((1, 2), jnp.int32))["params"]
    init = layers.random_params(abstract)
    params, (report,) = load_pretrained({"t5": init}, ml_collections.ConfigDict(
        {"mt5": str(tmp_path / "encoder")}))
    cf.assert_trees_bitwise_equal(params["t5"]["decoder"], init["decoder"])
    np.testing.assert_array_equal(params["t5"]["token_embedder"]["embedding"],
                                  hf.shared.weight.detach().numpy())
    assert report.missing and all(p.startswith("decoder/") for p in report.missing)


def test_timm_heads_come_from_the_architecture_without_model_args():
    # The hub's timm/vit_base_patch16_224.augreg_in21k config.json has no model_args.
    headers = {"patch_embed.proj.weight": ((768, 3, 16, 16), "model.safetensors")}
    heads = lambda config: hugging_face._heads(hugging_face.TIMM, config, headers)  # noqa: E731
    assert heads({"architecture": "vit_base_patch16_224"}) == 12
    assert heads({"architecture": "vit_large_patch16_224", "model_args": {"num_heads": 4}}) == 4


def test_timm_folder_is_described_by_its_config(vit_folder, tmp_path):
    _, what = hugging_face.read(_timm_folder(vit_folder[1], str(tmp_path / "timm")))
    assert what == ("timm ViT (width 32, patch 8) vit_base_patch16_224.augreg_in21k, 2 layers, "
                    "safetensors, 1 file")


def test_a_folder_of_pytorch_weights_only_is_named_in_one_line(tmp_path):
    hf = _hf_vit()  # As transformers 4 saved (5 writes safetensors only).
    hf.config.save_pretrained(str(tmp_path / "vit"))
    torch.save(hf.state_dict(), tmp_path / "vit" / "pytorch_model.bin")
    with pytest.raises(ValueError) as error:
        load_pretrained({"img": {}}, ml_collections.ConfigDict({"vit": str(tmp_path / "vit")}))
    assert str(error.value) == (
        f"init.vit: {tmp_path}/vit is not a big_vision .npz: it is a folder, a Hugging Face "
        "model folder without safetensors (its pytorch_model*.bin is not read; docs/files.md)")
