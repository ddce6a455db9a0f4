"""Readers of the upstream checkpoints (T5X mT5, big_vision ViT) that initialize the captioner.

    params, reports = load_pretrained(params, config.init)

`t5x`, `t5x_orbax` and `t5x_layout` read T5X checkpoints, `big_vision` the npz files,
`hugging_face` Hugging Face and timm safetensors (chosen by what the path holds), `merge`
matches the trees, `trees` converts nested <-> flat ('a/b/c') trees, `files`
reads local or gs:// paths. Every refusal is one line naming the path.
"""

from collections.abc import Callable
from typing import Any

import errors
from model.upstream import big_vision, files, hugging_face, t5x
from model.upstream.merge import Report, merge_params

# config field -> (loader, prefix in the captioner's tree, allow_missing). Classifier ViTs have no
# MAP head and MAP-head ViTs no `cls`: the unused one keeps its init.
_SOURCES: dict[str, tuple[Callable[[str], dict], str, Any]] = {
    "mt5": (t5x.load, "t5", False),
    "vit": (big_vision.load, "img", (r"MAPHead_0/.*", "cls")),
}


def read_pretrained(init_config) -> dict[str, tuple[dict, str]]:
    """{field: (tree, source)} of the checkpoints `init_config` names (`mt5`, `vit`), read by
    `hugging_face` for safetensors (the source says the layout found), else by the field's loader.
    FileNotFoundError / ValueError messages start with "init.<field>:"."""
    read = {}
    for field, (loader, _, _) in _SOURCES.items():
        if not (path := init_config.get(field)):
            continue
        with errors.reraised(FileNotFoundError, FileNotFoundError, f"init.{field}: "), \
                errors.reraised(ValueError, ValueError, f"init.{field}: "):
            path = hugging_face.local_path(path)
            if not files.is_gcs(path) and hugging_face.holds_safetensors(path):
                tree, what = hugging_face.read(path)
                read[field] = tree, f"{path} ({what})"
            else:
                read[field] = loader(path), path
    return read


def load_pretrained(params: dict, init_config, *, check_only: bool = False,
                    read: dict | None = None) -> tuple[dict, list[Report]]:
    """Overwrites parts of initialized captioner params with pretrained weights.
    `init_config` fields: `mt5` (a T5X `checkpoint_<step>` folder, see `t5x.load`) and `vit` (a
    big_vision `.npz` or step copy, optionally `:subtree`), or either as Hugging Face / timm
    safetensors (`hugging_face.read`); None or '' skips that part. An mT5 without a decoder
    (`MT5EncoderModel`) leaves the decoder at its init. `check_only`: the shapes are checked,
    nothing read from safetensors, `params` returned as they are. `read`: what
    `read_pretrained(init_config)` returned (else they are read now). Returns (params, one
    `Report` per checkpoint). FileNotFoundError / ValueError messages start with "init.<field>:"."""
    reports = []
    read = read_pretrained(init_config) if read is None else read
    for field, (loaded, source) in read.items():
        _, prefix, allow_missing = _SOURCES[field]
        if field == "mt5" and "decoder" not in loaded:
            allow_missing = (r"decoder/.*",)
        with errors.reraised(ValueError, ValueError, f"init.{field}: "):
            params, report = merge_params(params, loaded, prefix=prefix, source=source,
                                          allow_missing=allow_missing, check_only=check_only)
        reports.append(report)
    return params, reports
