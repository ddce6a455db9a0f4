"""Image captioner: ViT image encoder + mT5 encoder-decoder.

The ViT's pooled vector ('pooled', the paper's) or patch tokens ('patches', PaLI-style),
projected to the mT5 width, go before the embedded LangId prompt in the mT5 encoder.
Parameters: {'img': ViT, 'img_proj': Dense, 't5': T5X}.
"""

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

import errors
from model import partitioning as part
from model import t5 as t5_lib
from model import vit as vit_lib

FUSIONS = ("pooled", "patches")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}

# float32 [256]: x -> x * (2 / 255) - 1, each step rounded to float32 as
# tools/captioning/inputs.to_unit_range does.
_UNIT_RANGE = np.arange(256).astype(np.float32) * (2.0 / 255.0) - 1.0


def unit_range(images):
    """Model input in [-1, 1] from uint8 pixels (floats pass unchanged), by table lookup:
    the host's values bit for bit on every backend (a fused multiply-add would round otherwise)."""
    if jnp.issubdtype(images.dtype, jnp.floating):
        return images
    if images.dtype != jnp.uint8:
        raise TypeError(f"images must be uint8 pixels or floats in [-1, 1], got {images.dtype}")
    return jnp.asarray(_UNIT_RANGE)[images]


@dataclasses.dataclass(frozen=True)
class CaptionerConfig:
    """The two towers, how the image enters the mT5 encoder, and image size."""
    vit: vit_lib.ViTConfig
    t5: t5_lib.T5Config
    fusion: str = "pooled"
    image_size: int = 224

    def __post_init__(self):
        if self.fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {self.fusion!r}; known: {', '.join(FUSIONS)}")
        vit_lib.num_patches(self.vit, self.image_size)  # validates the image size

    @property
    def image_tokens(self) -> int:
        """Encoder positions taken by the image (before the prompt): 1 ('pooled') or one per
        patch ('patches')."""
        return 1 if self.fusion == "pooled" else vit_lib.num_patches(self.vit, self.image_size)


class Captioner(nn.Module):
    """ViT + projection + mT5; see the module docstring."""
    config: CaptionerConfig

    def setup(self):
        cfg = self.config
        self.img = vit_lib.ViT(cfg.vit)
        self.img_proj = nn.Dense(
            cfg.t5.emb_dim, dtype=cfg.t5.dtype, param_dtype=jnp.float32,
            kernel_init=part.param_init(nn.initializers.lecun_normal(), (None, part.EMBED)),
            bias_init=part.param_init(nn.initializers.zeros, (part.EMBED,)))
        self.t5 = t5_lib.T5(cfg.t5)

    @property
    def num_image_tokens(self) -> int:
        """Encoder positions taken by the image (before the prompt)."""
        return self.config.image_tokens

    def encode(self, images, prompt_tokens, train: bool = False):
        """Encodes images ([batch, H, W, 3] uint8 or floats in [-1, 1]) and prompts (0 = padding).
        Returns (encoded [batch, image tokens + prompt_len, emb], mask: image positions valid)."""
        # [batch, num_image_tokens, emb] then [batch, prompt_len, emb]
        image = self.image_embeddings(images, train)
        embeddings = jnp.concatenate([image, self.t5.embed(prompt_tokens)], axis=1)
        encoder_mask = jnp.concatenate([jnp.ones(image.shape[:2], bool), prompt_tokens != 0], 1)
        return self.t5.encode(embeddings, encoder_mask, train=train), encoder_mask

    def image_embeddings(self, images, train: bool = False):
        """The image's encoder inputs [batch, num_image_tokens, emb]."""
        pooled, patches = self.img(unit_range(images), train=train)
        image_tokens = pooled[:, None, :] if self.config.fusion == "pooled" else patches
        return self.img_proj(image_tokens).astype(self.config.t5.dtype)

    def packed_hidden(self, images, rows, decoder_input_tokens, train: bool = False):
        """`hidden` of packed rows (data/pipeline/packing.py): the encoder input of row position p
        is image embedding `rows["image_slots"][p]` (of the images flattened to [batch x
        num_image_tokens]; -1: none) or the embedded token `rows["encoder_tokens"][p]`."""
        image = self.image_embeddings(images, train)
        image = image.reshape(-1, image.shape[-1])[jnp.maximum(rows["image_slots"], 0)]
        slots = rows["image_slots"][..., None] >= 0
        embeddings = jnp.where(slots, image, self.t5.embed(rows["encoder_tokens"]))
        enc_segments, dec_segments = rows["encoder_segments"], rows["decoder_segments"]
        encoded = self.t5.encoder(embeddings, enc_segments > 0, train=train,
                                  segments=enc_segments)
        return self.t5.decoder(encoded, enc_segments > 0, decoder_input_tokens, train=train,
                               hidden_only=True, segments=(dec_segments, enc_segments))

    def decode(self, encoded, encoder_mask, decoder_input_tokens, decode: bool = False,
               train: bool = False):
        """Float32 decoder logits; see `t5.Decoder.__call__`."""
        return self.t5.decode(encoded, encoder_mask, decoder_input_tokens, decode=decode,
                              train=train)

    def hidden(self, images, prompt_tokens, decoder_input_tokens, train: bool = False):
        """Teacher-forced last decoder states [batch, target_len, emb], before `logits_kernel`."""
        encoded, encoder_mask = self.encode(images, prompt_tokens, train=train)
        return self.t5.decoder(encoded, encoder_mask, decoder_input_tokens, train=train,
                               hidden_only=True)

    def __call__(self, images, prompt_tokens, decoder_input_tokens, train: bool = False):
        """Teacher-forced float32 logits [batch, target_len, vocab]; train needs a 'dropout' rng."""
        encoded, encoder_mask = self.encode(images, prompt_tokens, train=train)
        return self.decode(encoded, encoder_mask, decoder_input_tokens, train=train)


def _fields(config) -> dict:
    """The set (non-None) entries of a ConfigDict or dict."""
    return {k: v for k, v in dict((config or {}).items()).items() if v is not None}


def captioner_config(model_config) -> CaptionerConfig:
    """The CaptionerConfig of a `config.model` (its fields: training/run_config.FIELDS, which
    checks their choices); ValueError names the key at fault.
    vit.variant and t5.variant are required; other keys override the dataclasses' fields (dtype:
    activations; dropout: the mT5's; scan / remat / remat_policy: both towers)."""
    model = _fields(model_config)
    vit_fields, t5_fields = _fields(model.pop("vit", None)), _fields(model.pop("t5", None))
    common = {k: model.pop(k) for k in ("scan", "remat", "remat_policy") if k in model}
    if "dtype" in model:
        common["dtype"] = DTYPES[model.pop("dtype")]
    if "dropout" in vit_fields:
        vit_fields["dropout_rate"] = float(vit_fields.pop("dropout"))
    if "dropout" in model:
        t5_fields["dropout_rate"] = float(model.pop("dropout"))
    towers = {}
    for name, build, fields in (("vit", vit_lib.vit_config, vit_fields),
                                ("t5", t5_lib.t5_config, t5_fields)):
        if "variant" not in fields:
            raise ValueError(f"config.model.{name}.variant is required")
        with errors.reraised(ValueError, ValueError, f"config.model.{name}: "):
            towers[name] = build(fields.pop("variant"), **fields, **common)
    with errors.reraised(ValueError, (TypeError, ValueError), "config.model: "):
        return CaptionerConfig(**towers, **model)


def padded_vocab_size(vocab_size, multiple=128):
    """The vocabulary rounded up to a multiple of 128 (as mT5's 250112): model-parallel friendly."""
    return -(-vocab_size // multiple) * multiple


def from_config(model_config, vocab_size=None) -> Captioner:
    """The Captioner of a `config.model`; an unset `t5.vocab_size` is `vocab_size`, padded."""
    if model_config.t5.get("vocab_size") is None and vocab_size is not None:
        model_config = ml_collections.ConfigDict(model_config.to_dict())
        model_config.t5.vocab_size = padded_vocab_size(vocab_size)
    return Captioner(captioner_config(model_config))


def logits_kernel(params):
    """The output layer's kernel [emb, vocab]: logits = `Captioner.hidden(...)` @ it."""
    return params["t5"]["decoder"]["logits_dense"]["kernel"]


def init_params(model: Captioner, rng: jax.Array, boxed: bool = False):
    """Randomly initialized 'params'; `boxed` keeps the nn.LogicallyPartitioned boxes."""
    # An image, a prompt of 4 tokens and a target of 8.
    size = model.config.image_size
    params = model.init(rng, jnp.zeros((1, size, size, 3), jnp.float32),
                        jnp.zeros((1, 4), jnp.int32), jnp.zeros((1, 8), jnp.int32))["params"]
    return params if boxed else nn.unbox(params)


def abstract_params(model: Captioner, boxed: bool = True):
    """Parameter shapes/dtypes (jax.ShapeDtypeStruct), without allocating them; a new tree
    per call (the caller may change it), traced once per model."""
    tree = _abstract_boxed_params(model)
    if boxed:
        return jax.tree.map(lambda x: x, tree)
    # Not nn.unbox: under a mesh it would constrain the shapes' sharding.
    is_box = lambda x: isinstance(x, nn.Partitioned)  # noqa: E731
    return jax.tree.map(lambda x: x.value if is_box(x) else x, tree, is_leaf=is_box)


@functools.lru_cache(maxsize=8)
def _abstract_boxed_params(model: Captioner):
    # Tracing the initializers takes about a second even for a tiny model; the trainer, its
    # optimizer state, the restore and the preflight all ask for these shapes.
    return jax.eval_shape(lambda: init_params(model, jax.random.key(0), boxed=True))
