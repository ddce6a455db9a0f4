"""Reader of Hugging Face and timm safetensors: mT5 (`MT5ForConditionalGeneration`,
`MT5EncoderModel`), ViT (`ViTModel`) and timm's `vit_*`, as the captioner's trees.

A model folder (`config.json` with `model.safetensors` or the shards of
`model.safetensors.index.json`), a Hugging Face cache folder (`models--org--name`, read at its
`refs/main` snapshot, or a `snapshots/<hash>` folder of links into `blobs/`), one `.safetensors`
file, or a `file://` URL of any of them. The layout is told by the tensor names, which the
headers hold: each array comes back as a `Lazy` whose shape is known before its bytes are read,
so that `merge.merge_params` refuses a wrong model before anything is loaded.
"""

import json
import os
import re
import urllib.parse
from collections.abc import Callable

import jax
import numpy as np
from safetensors import SafetensorError, safe_open

from model.upstream import files, trees

INDEX = "model.safetensors.index.json"
WEIGHTS = "model.safetensors"
MT5, VIT, TIMM = "Hugging Face mT5", "Hugging Face ViT", "timm ViT"
_MT5_SIZES = {512: "small", 768: "base", 1024: "large", 2048: "xl", 4096: "xxl"}
_VIT_SIZES = {192: "Ti", 384: "S", 768: "B", 1024: "L", 1280: "H", 1408: "g"}
# timm's head counts of its named sizes (its config.json names the architecture, not the heads).
_TIMM_HEADS = {"tiny": 3, "small": 6, "base": 12, "large": 16, "huge": 16, "giant": 16}
_ENC = r"encoder\.block\.(\d+)\.layer\."
# mT5 blocks' sub-layers: (stack, index in the block, HF module and projection (attention's
# one letter: q, k, v, o), ours, our norm before it).
_MT5_SUBLAYERS = (
    ("encoder", 0, r"SelfAttention\.(\w)", "attention", "pre_attention_layer_norm"),
    ("encoder", 1, r"DenseReluDense\.(\w+)", "mlp", "pre_mlp_layer_norm"),
    ("decoder", 0, r"SelfAttention\.(\w)", "self_attention", "pre_self_attention_layer_norm"),
    ("decoder", 1, r"EncDecAttention\.(\w)", "encoder_decoder_attention",
     "pre_cross_attention_layer_norm"),
    ("decoder", 2, r"DenseReluDense\.(\w+)", "mlp", "pre_mlp_layer_norm"))
_VIT_BLOCK = r"Transformer/encoderblock_\1/"
_VIT_ATTENTION = _VIT_BLOCK + "MultiHeadDotProductAttention_0/"
# (stored name, our path) per layout; the ViTs' names without their `.weight` / `.bias`, which
# become `kernel` or `scale` / `bias`.
_RULES = {
    MT5: ((r"(?:shared|encoder\.embed_tokens)\.weight", "token_embedder/embedding"),
          (r"lm_head\.weight", "decoder/logits_dense/kernel"),
          (r"(encoder|decoder)\.final_layer_norm\.weight", r"\1/\1_norm/scale"),
          # The stack's one relative-position table, kept in block 0 as [buckets, heads].
          (r"(encoder|decoder)\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\."
           r"weight", r"\1/relpos_bias/rel_embedding"),
          *((rf"{stack}\.block\.(\d+)\.layer\.{i}\.{hf}\.weight",
             rf"{stack}/layers_\1/{ours}/\2/kernel") for stack, i, hf, ours, _ in _MT5_SUBLAYERS),
          *((rf"{stack}\.block\.(\d+)\.layer\.{i}\.layer_norm\.weight",
             rf"{stack}/layers_\1/{norm}/scale") for stack, i, _, _, norm in _MT5_SUBLAYERS)),
    VIT: ((r"embeddings\.cls_token", "cls"), (r"embeddings\.position_embeddings", "pos_embedding"),
          (r"embeddings\.patch_embeddings\.projection", "embedding"),
          (r"layernorm", "Transformer/encoder_norm"),
          (r"encoder\.layer\.(\d+)\.attention\.attention\.(\w+)", _VIT_ATTENTION + r"\2"),
          (r"encoder\.layer\.(\d+)\.attention\.output\.dense", _VIT_ATTENTION + "out"),
          (r"encoder\.layer\.(\d+)\.intermediate\.dense", _VIT_BLOCK + "MlpBlock_0/Dense_0"),
          (r"encoder\.layer\.(\d+)\.output\.dense", _VIT_BLOCK + "MlpBlock_0/Dense_1"),
          (r"encoder\.layer\.(\d+)\.layernorm_before", _VIT_BLOCK + "LayerNorm_0"),
          (r"encoder\.layer\.(\d+)\.layernorm_after", _VIT_BLOCK + "LayerNorm_1")),
    TIMM: ((r"cls_token", "cls"), (r"pos_embed", "pos_embedding"),
           (r"patch_embed\.proj", "embedding"), (r"norm", "Transformer/encoder_norm"),
           (r"blocks\.(\d+)\.attn\.qkv", _VIT_ATTENTION + "qkv"),
           (r"blocks\.(\d+)\.attn\.proj", _VIT_ATTENTION + "out"),
           (r"blocks\.(\d+)\.mlp\.fc1", _VIT_BLOCK + "MlpBlock_0/Dense_0"),
           (r"blocks\.(\d+)\.mlp\.fc2", _VIT_BLOCK + "MlpBlock_0/Dense_1"),
           (r"blocks\.(\d+)\.norm1", _VIT_BLOCK + "LayerNorm_0"),
           (r"blocks\.(\d+)\.norm2", _VIT_BLOCK + "LayerNorm_1")),
}
_T5_ATTENTION = {"q": "query", "k": "key", "v": "value", "o": "out"}


class Lazy:
    """An array read when first used (`np.asarray`); its `shape` is known without reading it."""

    def __init__(self, shape: tuple, read: Callable[[], np.ndarray]):
        self.shape, self._read = tuple(shape), read

    def __array__(self, dtype=None, copy=None):
        array = self._read()
        return array if dtype is None else array.astype(dtype)


def local_path(path: str) -> str:
    """A `file://` URL as a path; a Hugging Face cache `models--org--name` folder as the
    snapshot its `refs/main` names (or its only one)."""
    if path.startswith("file://"):
        path = urllib.parse.unquote(urllib.parse.urlparse(path).path)
    snapshots = os.path.join(path, "snapshots")
    if not files.is_gcs(path) and os.path.isdir(snapshots):
        ref = os.path.join(path, "refs", "main")
        names = ([open(ref, encoding="utf-8").read().strip()] if os.path.isfile(ref)
                 else os.listdir(snapshots))
        if len(names) == 1:
            return os.path.join(snapshots, names[0])
    return path


def holds_safetensors(path: str) -> bool:
    """Whether a local `path` is a safetensors file or a folder holding `model.safetensors` or
    its shards' index."""
    if os.path.isdir(path):
        return any(os.path.isfile(os.path.join(path, name)) for name in (INDEX, WEIGHTS))
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return path.endswith(".safetensors") or f.read(10)[8:] == b'{"'


def _weight_files(path: str) -> list[str]:
    if not os.path.isfile(os.path.join(path, INDEX)):
        return [os.path.join(path, WEIGHTS) if os.path.isdir(path) else path]
    try:
        with open(os.path.join(path, INDEX), encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    except (ValueError, KeyError, AttributeError) as e:
        raise ValueError(f"{path}/{INDEX} has no `weight_map` of shards ({e!r})") from None
    return [os.path.join(path, shard) for shard in shards]


def _headers(weight_files: list[str]) -> dict[str, tuple[tuple, str]]:
    """{tensor name: (shape, file)} from the files' headers alone."""
    found = {}
    for file in weight_files:
        try:
            with safe_open(file, framework="np") as f:
                for name in f.keys():  # noqa: SIM118  (a safe_open has no __iter__)
                    found[name] = (tuple(f.get_slice(name).get_shape()), file)
        except (OSError, SafetensorError) as e:
            raise ValueError(f"{file} is not a readable safetensors file: "
                             f"{files.one_line(e)}") from e
    return found


def _read(file: str, name: str) -> np.ndarray:
    with safe_open(file, framework="np") as f:
        return f.get_tensor(name).astype(np.float32)


def _config(path: str) -> dict:
    """The folder's (or the file's folder's) config.json, {} if none."""
    config = os.path.join(path if os.path.isdir(path) else os.path.dirname(path), "config.json")
    if not os.path.isfile(config):
        return {}
    with open(config, encoding="utf-8") as f:
        return json.load(f)


def _layout(names: list[str]) -> str | None:
    if any(re.fullmatch(_ENC + r"0\.SelfAttention\.q\.weight", name) for name in names):
        return MT5
    if "patch_embed.proj.weight" in names:
        return TIMM
    if any(n.removeprefix("vit.") == "embeddings.patch_embeddings.projection.weight"
           for n in names):
        return VIT
    return None


def _our_path(layout: str, name: str) -> str | None:
    """Where a stored tensor goes in our tree (None: nowhere, e.g. a classifier head)."""
    leaf = ""
    if layout != MT5:
        name, _, leaf = name.removeprefix("vit.").rpartition(".")
        if leaf not in ("weight", "bias"):  # cls_token, pos_embed: no leaf
            name, leaf = f"{name}.{leaf}".lstrip("."), ""
    path = next((match.expand(template) for pattern, template in _RULES[layout]
                 if (match := re.fullmatch(pattern, name))), None)
    if path is None:
        return None
    if layout == MT5:  # HF's q, k, v, o
        return re.sub(r"/([qkvo])/kernel$", lambda m: f"/{_T5_ATTENTION[m[1]]}/kernel", path)
    if leaf == "weight":
        leaf = "scale" if re.search(r"(norm|LayerNorm_\d)$", path) else "kernel"
    return f"{path}/{leaf}" if leaf else path


def _transform(path: str, heads: int | None) -> Callable:
    """How a stored tensor becomes our array at `path` (torch Linear [out, in] -> [in, out])."""
    if path == "embedding/kernel":  # conv [out, in, h, w] -> [h, w, in, out]
        return lambda w: w.transpose(2, 3, 1, 0)
    if heads and re.search(r"/(query|key|value)/kernel$", path):
        return lambda w: w.T.reshape(w.shape[1], heads, -1)
    if heads and re.search(r"/(query|key|value)/bias$", path):
        return lambda w: w.reshape(heads, -1)
    if heads and path.endswith("/out/kernel"):
        return lambda w: w.T.reshape(heads, -1, w.shape[0])
    if path.endswith(("/kernel", "/rel_embedding")):
        return lambda w: w.T
    return lambda w: w


def _conversions(layout: str, name: str, heads: int | None) -> list[tuple[str, Callable]]:
    """[(our path, transform)] of a stored tensor; timm's `qkv` splits into three."""
    path = _our_path(layout, name)
    if path is None:
        return []
    if "/qkv/" not in path:
        return [(path, _transform(path, heads))]
    parts = []
    for i, part in enumerate(("query", "key", "value")):
        ours = path.replace("/qkv/", f"/{part}/")
        take = _transform(ours, heads)
        parts.append((ours, lambda w, i=i, take=take: take(w.reshape(3, -1, *w.shape[1:])[i])))
    return parts


def _heads(layout: str, config: dict, headers: dict) -> int | None:
    """The ViT's attention heads (config.json's, timm's by the architecture's size)."""
    if layout == VIT:
        return config.get("num_attention_heads")
    if layout == TIMM:
        size = re.match(r"vit_([a-z]+)_", config.get("architecture", ""))
        width = headers["patch_embed.proj.weight"][0][0]
        return (config.get("model_args", {}).get("num_heads")
                or (_TIMM_HEADS.get(size[1]) if size else None) or width // 64)
    return None


def _variant(layout: str, shapes: dict[str, tuple], config: dict) -> str:
    """'mT5-base, 12+12 layers', 'ViT-B/16 <timm name>, 12 layers' (as the widths tell)."""
    def depth(prefix):
        return len({p.split("/")[1] for p in shapes if p.startswith(prefix)})
    if layout == MT5:
        width = shapes.get("token_embedder/embedding", (0, 0))[1]
        name = f"mT5-{_MT5_SIZES[width]}" if width in _MT5_SIZES else f"mT5 (width {width})"
        return f"{name}, {depth('encoder/layers_')}+{depth('decoder/layers_')} layers"
    patch, _, _, width = shapes.get("embedding/kernel", (0, 0, 0, 0))
    name = (f"ViT-{_VIT_SIZES[width]}/{patch}" if width in _VIT_SIZES
            else f"ViT (width {width}, patch {patch})")
    if "architecture" in config:
        tag = config.get("pretrained_cfg", {}).get("tag")
        name += f" {config['architecture']}" + (f".{tag}" if tag else "")
    return f"{name}, {depth('Transformer/encoderblock_')} layers"


def read(path: str) -> tuple[dict, str]:
    """(nested {our path: Lazy} tree, what it is: "Hugging Face mT5-base, 12+12 layers,
    safetensors, 2 shards") of a local path `holds_safetensors`; ValueError for another layout."""
    weight_files = _weight_files(path)
    headers = _headers(weight_files)
    count = f"{len(weight_files)} shards" if len(weight_files) > 1 else "1 file"
    layout = _layout(list(headers))
    if layout is None:
        shown = ", ".join(list(headers)[:4]) + (", ..." if len(headers) > 4 else "")
        raise ValueError(
            f"{path} is safetensors ({count}) of {len(headers)} tensors ({shown}) in none of "
            f"the layouts read here: Hugging Face mT5 or ViT, timm ViT (docs/models.md)")
    config = _config(path)
    heads = _heads(layout, config, headers)
    if layout != MT5 and not heads:
        raise ValueError(f"{path}: the attention heads of this {layout} are not known: put its "
                         "config.json beside the weights")
    flat = {}
    for name, (shape, file) in headers.items():
        for ours, transform in _conversions(layout, name, heads):
            try:
                out = jax.eval_shape(transform, jax.ShapeDtypeStruct(shape, np.float32)).shape
            except (TypeError, ValueError) as e:  # e.g. a width no multiple of the heads
                raise ValueError(f"{path}: {name} {shape} does not fit a {layout} of {heads} "
                                 f"heads ({files.one_line(e)})") from None
            flat[ours] = Lazy(out, lambda f=file, n=name, t=transform: t(_read(f, n)))
    shapes = {ours: lazy.shape for ours, lazy in flat.items()}
    origin = "timm" if layout == TIMM else "Hugging Face"
    return trees.unflatten_tree(flat), \
        f"{origin} {_variant(layout, shapes, config)}, safetensors, {count}"
