"""Reader of Hugging Face and timm safetensors: mT5 (`MT5ForConditionalGeneration`,
`MT5EncoderModel`), ViT (`ViTModel`) and timm's `vit_*`, as the captioner's trees.

A model folder (`config.json` with `model.safetensors` or the shards of
`model.safetensors.index.json`), a Hugging Face cache folder (`models--org--name`, read at its
`refs/main` snapshot, or a `snapshots/<hash>` folder of links into `blobs/`), one `.safetensors`
file, or a `file://` URL of any of them. The layout is told by the tensor names, which only the
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
from safetensors import safe_open

from model.upstream import files, trees

INDEX = "model.safetensors.index.json"
WEIGHTS = "model.safetensors"
MT5, VIT, TIMM = "Hugging Face mT5", "Hugging Face ViT", "timm ViT"
_ORIGIN = {MT5: "Hugging Face", VIT: "Hugging Face", TIMM: "timm"}
_MT5_SIZES = {512: "small", 768: "base", 1024: "large", 2048: "xl", 4096: "xxl"}
_VIT_SIZES = {192: "Ti", 384: "S", 768: "B", 1024: "L", 1280: "H", 1408: "g"}
# timm's head counts of its named sizes (its config.json names the architecture, not the heads).
_TIMM_HEADS = {"tiny": 3, "small": 6, "base": 12, "large": 16, "huge": 16, "giant": 16}
_T5_ATTENTION = {"q": "query", "k": "key", "v": "value", "o": "out"}
# (stack, sub-layer of an HF block): (our module, our norm before it)
_T5_SUBLAYERS = {
    ("encoder", "0"): ("attention", "pre_attention_layer_norm"),
    ("encoder", "1"): ("mlp", "pre_mlp_layer_norm"),
    ("decoder", "0"): ("self_attention", "pre_self_attention_layer_norm"),
    ("decoder", "1"): ("encoder_decoder_attention", "pre_cross_attention_layer_norm"),
    ("decoder", "2"): ("mlp", "pre_mlp_layer_norm"),
}
_HF_VIT_MODULES = {"attention.attention.query": "MultiHeadDotProductAttention_0/query",
                   "attention.attention.key": "MultiHeadDotProductAttention_0/key",
                   "attention.attention.value": "MultiHeadDotProductAttention_0/value",
                   "attention.output.dense": "MultiHeadDotProductAttention_0/out",
                   "intermediate.dense": "MlpBlock_0/Dense_0",
                   "output.dense": "MlpBlock_0/Dense_1",
                   "layernorm_before": "LayerNorm_0", "layernorm_after": "LayerNorm_1"}
_TIMM_MODULES = {"attn.proj": "MultiHeadDotProductAttention_0/out", "mlp.fc1": "MlpBlock_0/Dense_0",
                 "mlp.fc2": "MlpBlock_0/Dense_1", "norm1": "LayerNorm_0", "norm2": "LayerNorm_1"}
_VIT_TOP = {"cls": "cls", "pos": "pos_embedding", "patch.weight": "embedding/kernel",
            "patch.bias": "embedding/bias", "norm.weight": "Transformer/encoder_norm/scale",
            "norm.bias": "Transformer/encoder_norm/bias"}


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


def _weight_files(path: str) -> list[str]:
    """The safetensors files of a folder or file path ([] if it holds none)."""
    if files.is_gcs(path):
        return []
    if os.path.isfile(path):
        with open(path, "rb") as f:
            head = f.read(10)
        return [path] if path.endswith(".safetensors") or head[8:10] == b'{"' else []
    if os.path.isfile(os.path.join(path, INDEX)):
        with open(os.path.join(path, INDEX), encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(path, shard) for shard in shards]
    weights = os.path.join(path, WEIGHTS)
    return [weights] if os.path.isfile(weights) else []


def holds_safetensors(path: str) -> bool:
    """Whether `path` (after `local_path`) is a safetensors file or a folder of them."""
    try:
        return bool(_weight_files(local_path(path)))
    except (OSError, ValueError, KeyError):
        return False


def _headers(weight_files: list[str]) -> dict[str, tuple[tuple, str]]:
    """{tensor name: (shape, file)} from the files' headers alone."""
    found = {}
    for file in weight_files:
        try:
            with safe_open(file, framework="np") as f:
                for name in f.keys():  # noqa: SIM118  (a safe_open has no __iter__)
                    found[name] = (tuple(f.get_slice(name).get_shape()), file)
        except (OSError, ValueError, RuntimeError) as e:  # safetensors' own error types
            raise ValueError(f"{file} is not a readable safetensors file: "
                             f"{files.one_line(e)}") from e
    return found


def _read(file: str, name: str) -> np.ndarray:
    with safe_open(file, framework="np") as f:
        return f.get_tensor(name).astype(np.float32)


def _config(path: str) -> dict:
    """The folder's (or the file's folder's) config.json, {} if none."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    config = os.path.join(folder, "config.json")
    if not os.path.isfile(config):
        return {}
    with open(config, encoding="utf-8") as f:
        return json.load(f)


# Each converter maps one stored tensor to [(our path, transform of the stored array)].
def _mt5_rule(name: str, config: dict):
    linear = lambda w: w.T  # noqa: E731  torch Linear [out, in] -> kernel [in, out]
    if name in ("shared.weight", "encoder.embed_tokens.weight"):
        return [("token_embedder/embedding", None)]
    if name == "lm_head.weight":
        return [("decoder/logits_dense/kernel", linear)]
    if m := re.fullmatch(r"(encoder|decoder)\.final_layer_norm\.weight", name):
        return [(f"{m[1]}/{m[1]}_norm/scale", None)]
    m = re.fullmatch(r"(encoder|decoder)\.block\.(\d+)\.layer\.(\d)\.(.+)\.weight", name)
    if not m or (m[1], m[3]) not in _T5_SUBLAYERS:
        return None
    stack, block, (module, norm) = m[1], m[2], _T5_SUBLAYERS[m[1], m[3]]
    if m[4] == "SelfAttention.relative_attention_bias":  # [buckets, heads], in block 0
        return [(f"{stack}/relpos_bias/rel_embedding", linear)] if block == "0" else None
    if m[4] == "layer_norm":
        return [(f"{stack}/layers_{block}/{norm}/scale", None)]
    leaf = m[4].rpartition(".")[2]
    return [(f"{stack}/layers_{block}/{module}/{_T5_ATTENTION.get(leaf, leaf)}/kernel", linear)]


def _vit_leaf(module: str, leaf: str, heads: int):
    """(our leaf name, transform) of a torch Linear / LayerNorm `leaf` for our `module`."""
    if module.startswith("LayerNorm"):
        return ("scale" if leaf == "weight" else "bias"), None
    if leaf == "bias":
        return "bias", (None if module.endswith(("out", "Dense_0", "Dense_1"))
                        else lambda b: b.reshape(heads, -1))
    if module.endswith("out"):
        return "kernel", lambda w: w.T.reshape(heads, -1, w.shape[0])
    if module.endswith(("query", "key", "value")):
        return "kernel", lambda w: w.T.reshape(w.shape[1], heads, -1)
    return "kernel", lambda w: w.T


def _vit_top(key: str):
    """The rules of the tensors outside the blocks (named by `_VIT_TOP`'s keys)."""
    to_kernel = (lambda w: w.transpose(2, 3, 1, 0)) if key == "patch.weight" else None
    return [(_VIT_TOP[key], to_kernel)]


def _hf_vit_rule(name: str, config: dict):
    name = name.removeprefix("vit.")  # ViTForImageClassification's prefix
    top = {"embeddings.cls_token": "cls", "embeddings.position_embeddings": "pos",
           "embeddings.patch_embeddings.projection.weight": "patch.weight",
           "embeddings.patch_embeddings.projection.bias": "patch.bias",
           "layernorm.weight": "norm.weight", "layernorm.bias": "norm.bias"}
    if name in top:
        return _vit_top(top[name])
    m = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)\.(weight|bias)", name)
    if not m or m[2] not in _HF_VIT_MODULES:
        return None
    module = _HF_VIT_MODULES[m[2]]
    leaf, transform = _vit_leaf(module, m[3], config["num_attention_heads"])
    return [(f"Transformer/encoderblock_{m[1]}/{module}/{leaf}", transform)]


def _timm_heads(config: dict) -> int | None:
    heads = config.get("model_args", {}).get("num_heads")
    size = re.match(r"vit_([a-z]+)_", config.get("architecture", ""))
    return heads or (_TIMM_HEADS.get(size[1]) if size else None)


def _timm_rule(name: str, config: dict):
    top = {"cls_token": "cls", "pos_embed": "pos", "patch_embed.proj.weight": "patch.weight",
           "patch_embed.proj.bias": "patch.bias", "norm.weight": "norm.weight",
           "norm.bias": "norm.bias"}
    if name in top:
        return _vit_top(top[name])
    m = re.fullmatch(r"blocks\.(\d+)\.(.+)\.(weight|bias)", name)
    if not m:
        return None
    block, heads = f"Transformer/encoderblock_{m[1]}", config["heads"]
    if m[2] == "attn.qkv":  # [3 * width, ...]: query, key and value stacked
        rules = []
        for i, part in enumerate(("query", "key", "value")):
            leaf, transform = _vit_leaf(part, m[3], heads)
            rules.append((f"{block}/MultiHeadDotProductAttention_0/{part}/{leaf}",
                          lambda w, i=i, t=transform: t(w.reshape(3, -1, *w.shape[1:])[i])))
        return rules
    if m[2] not in _TIMM_MODULES:
        return None
    module = _TIMM_MODULES[m[2]]
    leaf, transform = _vit_leaf(module, m[3], heads)
    return [(f"{block}/{module}/{leaf}", transform)]


def _layout(names: list[str]) -> str | None:
    if any(re.fullmatch(r"(encoder|decoder)\.block\.\d+\.layer\.0\.SelfAttention\.q\.weight", n)
           for n in names):
        return MT5
    if "patch_embed.proj.weight" in names:
        return TIMM
    if {"embeddings.patch_embeddings.projection.weight",
            "vit.embeddings.patch_embeddings.projection.weight"} & set(names):
        return VIT
    return None


def _variant(layout: str, shapes: dict[str, tuple], config: dict) -> str:
    """'mT5-base', 'ViT-B/16' (as far as the widths tell), with the depth."""
    if layout == MT5:
        width = shapes.get("token_embedder/embedding", (0, 0))[1]
        layers = {s: len({p.split("/")[1] for p in shapes if p.startswith(f"{s}/layers_")})
                  for s in ("encoder", "decoder")}
        name = f"mT5-{_MT5_SIZES[width]}" if width in _MT5_SIZES else f"mT5 (width {width})"
        return f"{name}, {layers['encoder']}+{layers['decoder']} layers"
    patch, _, _, width = shapes.get("embedding/kernel", (0, 0, 0, 0))
    depth = len({p.split("/")[1] for p in shapes if p.startswith("Transformer/encoderblock_")})
    name = f"ViT-{_VIT_SIZES[width]}/{patch}" if width in _VIT_SIZES else \
        f"ViT (width {width}, patch {patch})"
    tag = config.get("pretrained_cfg", {}).get("tag")
    arch = f" {config['architecture']}{'.' + tag if tag else ''}" if "architecture" in config \
        else ""
    return f"{name}{arch}, {depth} layers"


def read(path: str) -> tuple[dict, str]:
    """(nested {our path: Lazy} tree, what it is: "Hugging Face mT5-base, 12+12 layers,
    safetensors, 2 shards") of a path `holds_safetensors`; ValueError for no layout read here."""
    path = local_path(path)
    weight_files = _weight_files(path)
    headers = _headers(weight_files)
    layout = _layout(list(headers))
    count = (f"{len(weight_files)} shards" if len(weight_files) > 1 else "1 file")
    if layout is None:
        shown = ", ".join(list(headers)[:4]) + (", ..." if len(headers) > 4 else "")
        raise ValueError(
            f"{path} is safetensors ({count}) of {len(headers)} tensors ({shown}) in none of "
            f"the layouts read here: Hugging Face mT5 or ViT, timm ViT (docs/models.md)")
    config = _config(path)
    if layout == TIMM:
        width = headers["patch_embed.proj.weight"][0][0]
        config["heads"] = _timm_heads(config) or width // 64
    elif layout == VIT and "num_attention_heads" not in config:
        raise ValueError(f"{path}: a Hugging Face ViT needs its config.json "
                         "(num_attention_heads) beside the weights")
    rule = {MT5: _mt5_rule, VIT: _hf_vit_rule, TIMM: _timm_rule}[layout]
    flat = {}
    for name, (shape, file) in headers.items():
        for ours, transform in rule(name, config) or []:
            transform = transform or (lambda w: w)
            try:
                out = jax.eval_shape(transform, jax.ShapeDtypeStruct(shape, np.float32)).shape
            except (TypeError, ValueError) as e:  # e.g. a width no multiple of the heads
                raise ValueError(f"{path}: {name} {shape} does not fit {layout}'s layout "
                                 f"({files.one_line(e)})") from None
            flat[ours] = Lazy(out, lambda f=file, n=name, t=transform: t(_read(f, n)))
    if not flat:  # e.g. a file holding only `pooler.*`
        raise ValueError(f"{path} holds no {layout} parameter the captioner has")
    shapes = {ours: lazy.shape for ours, lazy in flat.items()}
    what = f"{_ORIGIN[layout]} {_variant(layout, shapes, config)}, safetensors, {count}"
    return trees.unflatten_tree(flat), what
