"""The same random weights in Hugging Face's MT5 and ViT and in this package's T5 and ViT give
outputs within 1e-4 (attention scaling, position buckets, GELU variants, norms, masking)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import layers, t5, vit
from tests.model import upstream_files as cf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ATOL = 1e-4


def _t(x) -> "torch.Tensor":
    return torch.from_numpy(np.array(x, np.float32))


def _t5_state_dict(params, cfg):
    """Our T5X-layout tree as HF MT5 weights, the token embedding tied in both stacks."""
    assert cfg.num_encoder_layers == cfg.num_decoder_layers
    sd = {name: _t(value) for name, value in cf.hf_mt5_state(
        jax.tree.map(np.asarray, params), cfg.num_encoder_layers).items()}
    sd["encoder.embed_tokens.weight"] = sd["decoder.embed_tokens.weight"] = sd["shared.weight"]
    return sd


def test_mt5_matches_hugging_face_with_padding():
    cfg = t5.t5_config("t5-tiny", num_heads=4, head_dim=8, emb_dim=32, mlp_dim=64,
                       num_encoder_layers=2, num_decoder_layers=2, vocab_size=128)
    model = t5.T5(cfg)
    rng = np.random.default_rng(0)
    # 12 encoder positions: offsets up to 11 reach T5's logarithmic buckets.
    enc_tokens = rng.integers(2, cfg.vocab_size, size=(3, 12)).astype(np.int32)
    enc_tokens[0, 7:] = 0   # padding
    enc_tokens[1, 10:] = 0
    dec_tokens = rng.integers(2, cfg.vocab_size, size=(3, 9)).astype(np.int32)
    dec_tokens[:, 0] = 0    # the decoder starts from 0
    abstract = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 2, 32)),
                              jnp.ones((1, 2), bool), jnp.zeros((1, 2), jnp.int32))["params"]
    params = layers.random_params(abstract, seed=1)

    def encode_tokens(m, tokens):  # as the captioner: embed, then encode (0 = padding)
        mask = tokens != 0
        return m.encode(m.embed(tokens), mask), mask

    def run(p, enc, dec):
        encoded, mask = model.apply({"params": p}, enc, method=encode_tokens)
        return encoded, model.apply({"params": p}, encoded, mask, dec, method="decode")

    encoded, logits = jax.jit(run)(params, enc_tokens, dec_tokens)

    hf_config = transformers.MT5Config(
        vocab_size=cfg.vocab_size, d_model=cfg.emb_dim, d_kv=cfg.head_dim,
        num_heads=cfg.num_heads, d_ff=cfg.mlp_dim, num_layers=cfg.num_encoder_layers,
        num_decoder_layers=cfg.num_decoder_layers, relative_attention_num_buckets=32,
        relative_attention_max_distance=128, dropout_rate=0.0, layer_norm_epsilon=1e-6,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, pad_token_id=0,
        eos_token_id=1, decoder_start_token_id=0)
    hf = transformers.MT5ForConditionalGeneration(hf_config).eval()
    # transformers 5 forces tie_word_embeddings=True in MT5Config (lm_head is
    # shared.weight); mT5 has an untied output layer, so give lm_head its own.
    hf.lm_head.weight = torch.nn.Parameter(torch.empty_like(hf.lm_head.weight))
    hf.load_state_dict(_t5_state_dict(params, cfg), strict=True)
    assert hf.lm_head.weight is not hf.shared.weight
    cf.assert_mt5_matches_transformers(hf, enc_tokens, dec_tokens, encoded, logits, atol=ATOL)


def _vit_state_dict(params, cfg):
    """Our big_vision-layout tree as HF ViT weights (transformers 5 names)."""
    width = cfg.width
    sd = {
        "embeddings.cls_token": _t(params["cls"]),
        # big_vision adds no position embedding to [cls]: a zero row for HF.
        "embeddings.position_embeddings": torch.cat(
            [torch.zeros(1, 1, width), _t(params["pos_embedding"])], dim=1),
        "embeddings.patch_embeddings.projection.weight": _t(
            np.transpose(params["embedding"]["kernel"], (3, 2, 0, 1))),
        "embeddings.patch_embeddings.projection.bias": _t(params["embedding"]["bias"]),
        "layernorm.weight": _t(params["Transformer"]["encoder_norm"]["scale"]),
        "layernorm.bias": _t(params["Transformer"]["encoder_norm"]["bias"]),
    }
    for i in range(cfg.depth):
        block, prefix = params["Transformer"][f"encoderblock_{i}"], f"layers.{i}"
        attn = block["MultiHeadDotProductAttention_0"]
        for ours, theirs in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
            sd[f"{prefix}.attention.{theirs}.weight"] = _t(
                np.reshape(attn[ours]["kernel"], (width, width))).T
            sd[f"{prefix}.attention.{theirs}.bias"] = _t(np.reshape(attn[ours]["bias"], -1))
        sd[f"{prefix}.attention.o_proj.weight"] = _t(
            np.reshape(attn["out"]["kernel"], (width, width))).T
        sd[f"{prefix}.attention.o_proj.bias"] = _t(attn["out"]["bias"])
        for ours, theirs in (("LayerNorm_0", "layernorm_before"),
                             ("LayerNorm_1", "layernorm_after")):
            sd[f"{prefix}.{theirs}.weight"] = _t(block[ours]["scale"])
            sd[f"{prefix}.{theirs}.bias"] = _t(block[ours]["bias"])
        for ours, theirs in (("Dense_0", "fc1"), ("Dense_1", "fc2")):
            sd[f"{prefix}.mlp.{theirs}.weight"] = _t(block["MlpBlock_0"][ours]["kernel"]).T
            sd[f"{prefix}.mlp.{theirs}.bias"] = _t(block["MlpBlock_0"][ours]["bias"])
    return sd


def test_vit_matches_hugging_face():
    cfg = vit.vit_config("mu/8", pool="tok", width=32, depth=2, mlp_dim=64, num_heads=2)
    model = vit.ViT(cfg)
    images = np.random.default_rng(2).uniform(-1, 1, (2, 32, 32, 3)).astype(np.float32)
    abstract = jax.eval_shape(model.init, jax.random.key(0), images)["params"]
    params = layers.random_params(abstract, seed=3)
    pooled, tokens = jax.jit(lambda p: model.apply({"params": p}, images))(params)
    pixel_values = torch.from_numpy(images.transpose(0, 3, 1, 2))

    def hugging_face(hidden_act):
        config = transformers.ViTConfig(
            hidden_size=cfg.width, num_hidden_layers=cfg.depth,
            num_attention_heads=cfg.num_heads, intermediate_size=cfg.mlp_dim, image_size=32,
            patch_size=8, num_channels=3, layer_norm_eps=1e-6, hidden_act=hidden_act,
            qkv_bias=True, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        hf = transformers.ViTModel(config, add_pooling_layer=False).eval()
        hf.load_state_dict(_vit_state_dict(params, cfg), strict=True)
        with torch.no_grad():
            return hf(pixel_values=pixel_values).last_hidden_state.numpy()

    # big_vision uses flax's nn.gelu default: the tanh approximation.
    hidden = hugging_face("gelu_pytorch_tanh")
    np.testing.assert_allclose(tokens, hidden[:, 1:], atol=ATOL)
    np.testing.assert_allclose(pooled, hidden[:, 0], atol=ATOL)
    # Global average pooling of the same tokens is what pool 'gap' returns.
    gap = vit.ViT(vit.vit_config("mu/8", width=32, depth=2, mlp_dim=64, num_heads=2))
    gap_params = {k: v for k, v in params.items() if k != "cls"}
    gap_pooled, gap_tokens = jax.jit(lambda p: gap.apply({"params": p}, images))(gap_params)
    np.testing.assert_allclose(gap_pooled, np.mean(np.asarray(gap_tokens), axis=1), atol=1e-6)
    # The exact-erf GELU gives tokens outside the tolerance: the check has teeth.
    assert np.max(np.abs(hugging_face("gelu")[:, 1:] - tokens)) > 3 * ATOL
