"""Readers of the upstream checkpoints (T5X mT5, big_vision ViT) that initialize the captioner.

    params, reports = load_pretrained(params, config.init)
    for report in reports:
        logging.info("%s", report)

`config.init.mt5` names a T5X checkpoint (mT5 text encoder-decoder, e.g.
gs://t5-data/pretrained_models/t5x/mt5_base/checkpoint_1000000) and
`config.init.vit` a big_vision `.npz` (ViT image encoder); each goes into its
part of the captioner's tree {'img': ViT, 'img_proj': ..., 't5': mT5}. The
modules: `t5x` (msgpack + zarr), `t5x_orbax` (t5x's Orbax manager) and
`t5x_layout` (scanned scalable_t5 stacks) read T5X checkpoints, `big_vision`
the npz files, `merge` matches the trees, `trees` converts between nested and
flat (`a/b/c`) trees, `files` reads local or gs:// paths and says what a path
holds when a loader refuses it. Every refusal is one line naming the path.
"""

from collections.abc import Callable
from typing import Any

from model.upstream import big_vision, merge, t5x
from model.upstream.merge import Report, merge_params

__all__ = ["Report", "big_vision", "load_pretrained", "merge", "merge_params", "t5x"]

# Classification-pretrained ViTs (a [cls] token and `head`) have no MAP head
# and MAP-head ViTs no `cls`: whichever the captioner uses keeps its init.
VIT_ALLOW_MISSING = (r"MAPHead_0/.*", "cls")

# config field -> (loader, prefix in the captioner's tree, allow_missing)
_SOURCES: dict[str, tuple[Callable[[str], dict], str, Any]] = {
    "mt5": (t5x.load, "t5", False),
    "vit": (big_vision.load, "img", VIT_ALLOW_MISSING),
}


def _prefix_in(params: dict, prefix: str) -> str:
    # Accept the flax variables dict {'params': ...} as well as the bare tree.
    if prefix not in params and isinstance(params.get("params"), dict):
        return f"params/{prefix}"
    return prefix


def load_pretrained(params: dict, init_config) -> tuple[dict, list[Report]]:
    """Overwrites parts of initialized captioner params with pretrained weights.

    Args:
        params: the captioner's initialized parameter tree ('img', 'img_proj',
            't5'), or the variables dict holding it under 'params'.
        init_config: ConfigDict (or dict) with optional string fields `mt5`
            (a T5X `checkpoint_<step>` directory, msgpack or Orbax, see
            `t5x.load`) and `vit` (big_vision `.npz` or a step copy
            `file.npz-<step>`, optionally with a `:subtree` suffix); None or ''
            skips that part. Other fields are ignored.

    Returns:
        (params, reports): the new tree and one `Report` per loaded checkpoint.

    Raises:
        FileNotFoundError: "init.<field>: no <format> at <path>: ...", or a
            folder that holds no checkpoint of the format (the message says
            what it holds).
        ValueError: an unreadable checkpoint, or one that does not fit the model.
        Every message starts with "init.<field>:" and names the path.
    """
    reports = []
    for field, (loader, prefix, allow_missing) in _SOURCES.items():
        path = init_config.get(field) if init_config is not None else None
        if not path:
            continue
        try:
            loaded = loader(path)
        except FileNotFoundError as e:
            # The loaders' messages name the path and what is (not) there.
            raise FileNotFoundError(f"init.{field}: {e}") from e
        except ValueError as e:
            raise ValueError(f"init.{field}: {e}") from e
        try:
            params, report = merge_params(
                params, loaded, prefix=_prefix_in(params, prefix),
                allow_missing=allow_missing, source=path)
        except ValueError as e:
            raise ValueError(f"init.{field}: {e}") from e
        reports.append(report)
    return params, reports
