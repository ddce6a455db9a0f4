"""Writers of small checkpoints in the published T5X (msgpack + zarr, Orbax, scanned) and
big_vision (npz) formats, following the real writers' on-disk output."""

import dataclasses
import json
import os
import re
from collections.abc import Callable
from typing import Any

import jax
import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
import tensorstore as ts
from flax import serialization

from model.upstream import trees

BF16 = ml_dtypes.bfloat16
# Test files need not survive a power cut: skipping fsync makes writing
# hundreds of small zarr arrays fast and changes nothing in what is written.
_NO_FSYNC = ts.Context({"file_io_sync": False})
# The repository's own tree helpers: paths joined with '/' as both formats store them.
flatten, unflatten = trees.flatten_tree, trees.unflatten_tree


def random_tree(shapes: dict[str, tuple], seed: int = 0, dtype=np.float32) -> dict:
    """Random normal arrays of the given '/'-path -> shape, as a nested tree."""
    rng = np.random.default_rng(seed)
    return unflatten({path: rng.standard_normal(shape).astype(dtype)
                      for path, shape in shapes.items()})


def assert_trees_bitwise_equal(got: dict, want: dict) -> None:
    """The trees hold the same paths, and each the same dtype, shape and bytes."""
    got_flat, want_flat = flatten(got), flatten(want)
    assert sorted(got_flat) == sorted(want_flat)
    for path, value in want_flat.items():
        array = np.asarray(got_flat[path])
        assert array.dtype == value.dtype and array.shape == value.shape, path
        assert array.tobytes() == np.asarray(value).tobytes(), path


def tiny_mt5_shapes(vocab=40, emb=8, heads=2, head_dim=4, mlp=12, layers=2,
                    buckets=32, relpos_per_layer=False) -> dict[str, tuple]:
    """Parameter shapes of a T5.1.1 / mT5 model with T5X names.

    `relpos_per_layer`: each layer has its own `relpos_bias` (scalable_t5,
    umT5) instead of one per stack."""
    inner = heads * head_dim
    shapes = {"token_embedder/embedding": (vocab, emb),
              "encoder/encoder_norm/scale": (emb,),
              "decoder/decoder_norm/scale": (emb,),
              "decoder/logits_dense/kernel": (emb, vocab)}
    for stack in ("encoder", "decoder"):
        for i in range(layers) if relpos_per_layer else (None,):
            where = stack if i is None else f"{stack}/layers_{i}"
            shapes[f"{where}/relpos_bias/rel_embedding"] = (heads, buckets)
    attention = {"query": (emb, inner), "key": (emb, inner), "value": (emb, inner),
                 "out": (inner, emb)}
    mlp_shapes = {"wi_0": (emb, mlp), "wi_1": (emb, mlp), "wo": (mlp, emb)}
    for i in range(layers):
        enc, dec = f"encoder/layers_{i}", f"decoder/layers_{i}"
        shapes[f"{enc}/pre_attention_layer_norm/scale"] = (emb,)
        shapes[f"{enc}/pre_mlp_layer_norm/scale"] = (emb,)
        for name in ("pre_self_attention_layer_norm", "pre_cross_attention_layer_norm",
                     "pre_mlp_layer_norm"):
            shapes[f"{dec}/{name}/scale"] = (emb,)
        for name, shape in attention.items():
            shapes[f"{enc}/attention/{name}/kernel"] = shape
            shapes[f"{dec}/self_attention/{name}/kernel"] = shape
            shapes[f"{dec}/encoder_decoder_attention/{name}/kernel"] = shape
        for name, shape in mlp_shapes.items():
            shapes[f"{enc}/mlp/{name}/kernel"] = shape
            shapes[f"{dec}/mlp/{name}/kernel"] = shape
    return shapes


def adafactor_state(target: dict) -> dict:
    """An Adafactor state tree like T5X's (factored v_row / v_col for 2-D)."""
    param_states = {}
    for path, value in flatten(target).items():
        if value.ndim == 2:
            state = {"m": np.zeros((1,), np.float32),
                     "v": np.zeros((1,), np.float32),
                     "v_row": np.ones(value.shape[:1], np.float32),
                     "v_col": np.ones(value.shape[1:], np.float32)}
        else:
            state = {"m": np.zeros((1,), np.float32), "v": np.ones(value.shape, np.float32),
                     "v_row": np.zeros((1,), np.float32), "v_col": np.zeros((1,), np.float32)}
        param_states[path] = state
    return {"param_states": unflatten(param_states), "step": np.asarray(1000, np.int32)}


def _chunks(shape: tuple) -> list[int]:
    # Split the largest axis in two where possible so reads span several chunks.
    chunks = list(shape)
    if chunks:
        axis = int(np.argmax(chunks))
        if chunks[axis] % 2 == 0 and chunks[axis] > 1:
            chunks[axis] //= 2
    return chunks


def _write_zarr(spec: dict, array: np.ndarray, ckpt_dir: str) -> None:
    """Writes `array` where the relative `spec` points, like T5X's save."""
    absolute = {**spec, "kvstore": {**spec["kvstore"]}}
    absolute["kvstore"]["path"] = os.path.join(ckpt_dir, spec["kvstore"]["path"])
    absolute["kvstore"]["driver"] = "file"
    if np.dtype(spec["dtype"]) != array.dtype:
        # T5X casts to the save dtype with tensorstore's cast driver.
        absolute = {"base": absolute, "driver": "cast", "dtype": array.dtype.name}
    store = ts.open(absolute, create=True, open=True, context=_NO_FSYNC).result()
    store.write(array).result()


def write_t5x(ckpt_dir: str, target: dict, *, state: dict | None = None,
              save_dtype: Any | None = None, legacy_uint16: bool = False,
              inline: Callable[[str, np.ndarray], bool] = lambda name, a: False,
              absolute_paths: bool = False, kvstore_driver: str = "file",
              path_at_top: bool = False) -> str:
    """Writes a T5X `checkpoint_<step>` directory of `target` and `state`; returns it.
    `legacy_uint16`: bfloat16 as uint16 bits (version 2); `inline(name, array)`: kept in the
    msgpack; `kvstore_driver`: 'file', 'gfile' or 'gcs'; `path_at_top`: old specs' path."""
    os.makedirs(ckpt_dir)
    written: dict[str, Any] = {}
    items = [("target/" + k, v, True) for k, v in flatten(target).items()]
    items += [("state/" + k, v, False) for k, v in flatten(state or {}).items()]
    for name, array, is_target in items:
        array = np.asarray(array)
        stored_dtype = np.dtype(save_dtype if is_target and save_dtype else array.dtype)
        if is_target and inline(name, array):
            written[name] = array.astype(stored_dtype)
            continue
        if legacy_uint16 and stored_dtype == BF16:
            array, stored_dtype = array.astype(BF16).view(np.uint16), np.dtype(np.uint16)
        relative = name.replace("/", ".")
        spec = ts.Spec({
            "driver": "zarr", "dtype": stored_dtype.name,
            "kvstore": {"driver": "file", "path": relative},
            "metadata": {"compressor": {"id": "gzip"}, "shape": list(array.shape),
                         "chunks": _chunks(array.shape)},
        }).to_json()
        _write_zarr(spec, array, ckpt_dir)
        if absolute_paths:
            spec["kvstore"]["path"] = os.path.join(os.path.abspath(ckpt_dir),
                                                   spec["kvstore"]["path"])
        spec["kvstore"]["driver"] = kvstore_driver
        if kvstore_driver == "gcs":
            spec["kvstore"]["bucket"] = "t5x-dummy-bucket"
        if path_at_top:
            spec["path"] = spec["kvstore"].pop("path")
        written[name] = spec
    tree = unflatten(written)
    contents = {"version": 2 if legacy_uint16 else 3,
                "optimizer": {"target": tree["target"], "state": tree.get("state", {})}}
    # T5X calls serialization.to_bytes on a tree with ts.Spec leaves, which its registered handler
    # turns into exactly these JSON dicts; serializing the dicts directly gives the same bytes
    # (to_bytes would turn the JSON's lists into {'0': ...} dicts).
    with open(os.path.join(ckpt_dir, "checkpoint"), "wb") as f:
        f.write(serialization.msgpack_serialize(contents))
    return ckpt_dir


def tiny_vit_shapes(width=8, depth=2, mlp=16, heads=2, patch=4, grid=3, cls=False,
                    map_head=True, classifier=0) -> dict[str, tuple]:
    """Parameter shapes of a modern big_vision ViT (3-D attention kernels)."""
    head_dim = width // heads
    shapes = {"embedding/kernel": (patch, patch, 3, width), "embedding/bias": (width,),
              "pos_embedding": (1, grid * grid, width),
              "Transformer/encoder_norm/scale": (width,),
              "Transformer/encoder_norm/bias": (width,)}
    if cls:
        shapes["cls"] = (1, 1, width)
    if classifier:
        shapes["head/kernel"] = (width, classifier)
        shapes["head/bias"] = (classifier,)

    def attention_mlp_ln(prefix, attention, mlp_block, norms):
        for name in ("query", "key", "value"):
            shapes[f"{prefix}/{attention}/{name}/kernel"] = (width, heads, head_dim)
            shapes[f"{prefix}/{attention}/{name}/bias"] = (heads, head_dim)
        shapes[f"{prefix}/{attention}/out/kernel"] = (heads, head_dim, width)
        shapes[f"{prefix}/{attention}/out/bias"] = (width,)
        shapes[f"{prefix}/{mlp_block}/Dense_0/kernel"] = (width, mlp)
        shapes[f"{prefix}/{mlp_block}/Dense_0/bias"] = (mlp,)
        shapes[f"{prefix}/{mlp_block}/Dense_1/kernel"] = (mlp, width)
        shapes[f"{prefix}/{mlp_block}/Dense_1/bias"] = (width,)
        for norm in norms:
            shapes[f"{prefix}/{norm}/scale"] = (width,)
            shapes[f"{prefix}/{norm}/bias"] = (width,)

    for i in range(depth):
        attention_mlp_ln(f"Transformer/encoderblock_{i}", "MultiHeadDotProductAttention_0",
                         "MlpBlock_0", ("LayerNorm_0", "LayerNorm_1"))
    if map_head:
        shapes["MAPHead_0/probe"] = (1, 1, width)
        attention_mlp_ln("MAPHead_0", "MultiHeadDotProductAttention_0", "MlpBlock_0",
                         ("LayerNorm_0",))
    return shapes


def write_npz(path: str, tree: dict, *, compressed: bool = False) -> str:
    """Writes a big_vision npz checkpoint ('/'-joined keys); returns `path`."""
    flat = flatten(tree)
    with open(path, "wb") as f:
        (np.savez_compressed if compressed else np.savez)(f, **flat)
    return path


@dataclasses.dataclass
class _NoDatasetArgs(ocp.args.CheckpointArgs):
    item: Any = None


class _NoDatasetHandler(ocp.CheckpointHandler):
    """t5x's DatasetCheckpointHandler when the run has no iterator to save."""

    def save(self, directory, args):
        del directory, args

    def restore(self, directory, args=None):
        del directory, args


ocp.args.register_with_handler(_NoDatasetHandler, for_save=True, for_restore=True)(_NoDatasetArgs)


def write_t5x_orbax(model_dir: str, step: int, target: dict, *, state: dict | None = None,
                    use_ocdbt: bool = True) -> str:
    """Saves a T5X train state as t5x's Orbax manager does; returns `checkpoint_<step>`.

    `state` defaults to {'step'}; `use_ocdbt=False` gives orbax's earlier one-zarr-per-array layout.
    """
    def as_jax(tree):  # t5x's train state holds jax arrays
        return jax.tree.map(jax.numpy.asarray, tree)

    state_dict = {"target": as_jax(target),
                  "state": as_jax({"step": np.asarray(step, np.int32), **(state or {})})}
    options = ocp.CheckpointManagerOptions(
        step_prefix="checkpoint", cleanup_tmp_directories=True,
        async_options=ocp.AsyncOptions(timeout_secs=600))
    manager = ocp.CheckpointManager(os.path.abspath(model_dir), options=options, item_handlers={
        "state": ocp.PyTreeCheckpointHandler(use_ocdbt=use_ocdbt),
        "dataset": _NoDatasetHandler()})
    # t5x's _construct_save_args ends up with dtype=None for every leaf.
    save_args = jax.tree.map(lambda _: ocp.SaveArgs(), state_dict)
    manager.save(step, args=ocp.args.Composite(
        state=ocp.args.PyTreeSave(state_dict, save_args=save_args),
        dataset=_NoDatasetArgs(None)), force=True)
    manager.wait_until_finished()
    manager.close()
    return os.path.join(model_dir, f"checkpoint_{step}")


def write_t5x_orbax_aggregate(ckpt_dir: str, target: dict, *, state: dict | None = None) -> str:
    """Writes orbax's pre-`_METADATA` layout of a T5X state in `<ckpt_dir>/state`; returns ckpt_dir.

    Every array goes to a zstd zarr folder named by its '.'-joined path and
    appears in the msgpack `checkpoint` as 'PLACEHOLDER://<that name>'."""
    state_dir = os.path.join(ckpt_dir, "state")
    os.makedirs(state_dir)
    tree = {"target": target, "state": state or {"step": np.asarray(1, np.int32)}}
    placeholders, opening = {}, []
    for path, array in flatten(tree).items():
        array = np.asarray(array)
        name = path.replace("/", ".")
        opening.append((ts.open(
            {"driver": "zarr", "dtype": array.dtype.name,
             "kvstore": {"driver": "file", "path": os.path.join(state_dir, name)},
             "metadata": {"compressor": {"id": "zstd", "level": 1},
                          "shape": list(array.shape), "chunks": _chunks(array.shape)}},
            create=True, open=True, context=_NO_FSYNC), array))
        placeholders[path] = f"PLACEHOLDER://{name}"
    # All writes in flight together: a few hundred small arrays take a while one by one.
    for write in [store.result().write(array) for store, array in opening]:
        write.result()
    with open(os.path.join(state_dir, "checkpoint"), "wb") as f:
        f.write(serialization.msgpack_serialize(unflatten(placeholders)))
    return ckpt_dir


def scan_t5x(per_layer: dict, *, num_heads: int, axis: int = 1, attention_3d: bool = True) -> dict:
    """A per-layer T5X tree in scalable_t5's scanned layout: layers stacked on `axis`, and with
    `attention_3d` the attention kernels as [embed, heads, kv] / [heads, kv, embed]."""
    flat = flatten(per_layer)
    if attention_3d:
        for path, value in flat.items():
            parts = path.split("/")
            if parts[-1] != "kernel" or not parts[-3].endswith("attention"):
                continue
            if parts[-2] == "out":
                flat[path] = value.reshape(num_heads, -1, value.shape[-1])
            else:
                flat[path] = value.reshape(value.shape[0], num_heads, -1)
    out, stacks = {}, {}
    for path, value in flat.items():
        match = re.fullmatch(r"(encoder|decoder)/layers_(\d+)/(.*)", path)
        if match is None:
            out[path] = value
        else:
            stack, layer, rest = match.groups()
            stacks.setdefault(f"{stack}/{stack}/{rest}", {})[int(layer)] = value
    for path, layers in stacks.items():
        out[path] = np.stack([layers[i] for i in range(len(layers))], axis=axis)
    return unflatten(out)


def hf_mt5_state(tree: dict, num_layers: int) -> dict[str, np.ndarray]:
    """A T5X-layout mT5 tree as Hugging Face's MT5ForConditionalGeneration state dict
    (transformers' names; torch Linear weights [out, in]); `num_layers` per stack."""
    sd = {"shared.weight": tree["token_embedder"]["embedding"],
          "lm_head.weight": tree["decoder"]["logits_dense"]["kernel"].T}

    def attention(prefix, node):
        for ours, theirs in (("query", "q"), ("key", "k"), ("value", "v"), ("out", "o")):
            sd[f"{prefix}.{theirs}.weight"] = node[ours]["kernel"].T

    def mlp(prefix, node):
        for name in ("wi_0", "wi_1", "wo"):
            sd[f"{prefix}.DenseReluDense.{name}.weight"] = node[name]["kernel"].T

    # Sub-layers of a block: (HF module, ours, our norm before it); attention or MLP.
    sublayers = {"encoder": [("SelfAttention", "attention", "pre_attention_layer_norm"),
                             ("", "mlp", "pre_mlp_layer_norm")],
                 "decoder": [("SelfAttention", "self_attention", "pre_self_attention_layer_norm"),
                             ("EncDecAttention", "encoder_decoder_attention",
                              "pre_cross_attention_layer_norm"),
                             ("", "mlp", "pre_mlp_layer_norm")]}
    for stack, parts in sublayers.items():
        node = tree[stack]
        # HF keeps the stack's one relative-position table in block 0, transposed.
        sd[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = \
            node["relpos_bias"]["rel_embedding"].T
        sd[f"{stack}.final_layer_norm.weight"] = node[f"{stack}_norm"]["scale"]
        for i in range(num_layers):
            layer = node[f"layers_{i}"]
            for j, (theirs, ours, norm) in enumerate(parts):
                prefix = f"{stack}.block.{i}.layer.{j}"
                sd[f"{prefix}.layer_norm.weight"] = layer[norm]["scale"]
                if theirs:
                    attention(f"{prefix}.{theirs}", layer[ours])
                else:
                    mlp(prefix, layer[ours])
    return {name: np.ascontiguousarray(value) for name, value in sd.items()}


def timm_vit_state(hf_vit: dict[str, np.ndarray], depth: int) -> dict[str, np.ndarray]:
    """A Hugging Face ViTModel's saved tensors under timm's VisionTransformer names (query, key
    and value stacked in one `attn.qkv`)."""
    sd = {"cls_token": hf_vit["embeddings.cls_token"],
          "pos_embed": hf_vit["embeddings.position_embeddings"],
          "patch_embed.proj.weight": hf_vit["embeddings.patch_embeddings.projection.weight"],
          "patch_embed.proj.bias": hf_vit["embeddings.patch_embeddings.projection.bias"],
          "norm.weight": hf_vit["layernorm.weight"], "norm.bias": hf_vit["layernorm.bias"]}
    for i in range(depth):
        theirs, ours = f"encoder.layer.{i}", f"blocks.{i}"
        for leaf in ("weight", "bias"):
            sd[f"{ours}.attn.qkv.{leaf}"] = np.concatenate(
                [hf_vit[f"{theirs}.attention.attention.{part}.{leaf}"]
                 for part in ("query", "key", "value")])
            for hf_name, timm_name in (("attention.output.dense", "attn.proj"),
                                       ("layernorm_before", "norm1"),
                                       ("layernorm_after", "norm2"),
                                       ("intermediate.dense", "mlp.fc1"),
                                       ("output.dense", "mlp.fc2")):
                sd[f"{ours}.{timm_name}.{leaf}"] = hf_vit[f"{theirs}.{hf_name}.{leaf}"]
    return sd


def write_timm_vit(folder: str, state: dict[str, np.ndarray], *, width: int, depth: int,
                   heads: int, mlp: int, patch: int, image_size: int) -> str:
    """Writes a timm model folder as timm's `push_to_hub` does: `model.safetensors` and a
    `config.json` naming the architecture, its pretrained config and the model's arguments."""
    from safetensors.numpy import save_file

    os.makedirs(folder, exist_ok=True)
    save_file(state, os.path.join(folder, "model.safetensors"))
    config = {"architecture": "vit_base_patch16_224", "num_classes": 0, "num_features": width,
              "global_pool": "token",
              "model_args": {"embed_dim": width, "depth": depth, "num_heads": heads,
                             "mlp_ratio": mlp / width, "patch_size": patch,
                             "img_size": image_size},
              "pretrained_cfg": {"tag": "augreg_in21k", "custom_load": False,
                                 "input_size": [3, image_size, image_size],
                                 "fixed_input_size": True, "interpolation": "bicubic",
                                 "crop_pct": 0.9, "crop_mode": "center", "mean": [0.5] * 3,
                                 "std": [0.5] * 3, "num_classes": 0, "pool_size": None,
                                 "first_conv": "patch_embed.proj", "classifier": "head"}}
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return folder


def assert_mt5_matches_transformers(hf, enc_tokens, dec_tokens, encoded, logits, atol):
    """transformers' forward pass of `hf` (an MT5ForConditionalGeneration) on the tokens gives
    the encoder output `encoded` and the `logits` within `atol`, and the logits are not all
    near zero (which any two models would match)."""
    import torch  # Here: only the tests that compare with transformers have it.

    with torch.no_grad():
        out = hf(input_ids=torch.from_numpy(enc_tokens.astype(np.int64)),
                 attention_mask=torch.from_numpy(enc_tokens != 0),
                 decoder_input_ids=torch.from_numpy(dec_tokens.astype(np.int64)))
    np.testing.assert_allclose(encoded, out.encoder_last_hidden_state.numpy(), atol=atol)
    np.testing.assert_allclose(logits, out.logits.numpy(), atol=atol)
    assert float(np.std(logits)) > 0.1
