"""Parameter counts of a captioner config, next to the paper's model sizes.

    python -m tools.model_summary --config configs/<name>.py [--config.model.t5.variant=mt5-large]

The model is built abstractly with jax.eval_shape, so nothing is allocated
and full sizes (ViT-g/14 + mT5-large) work on a laptop CPU. Prints the
parameters of each tower (ViT, projection, mT5 encoder, decoder, token
embeddings, untied output layer) and of the whole model, beside the
figures of the Crossmodal-3600 paper (Sec. 3.2) with what explains the
difference.
"""

import sys
import textwrap

import jax
import numpy as np

from model import captioner

# Sec. 3.2 of the paper ("about" figures).
PAPER_VIT = {"B/16": 86e6, "g/14": 1011e6}
PAPER_T5 = {"mt5-base": 680e6, "mt5-large": 1230e6}

ROWS = (
    ("vit", "ViT image encoder (no classifier head)"),
    ("img_proj", "projection ViT width -> mT5 width"),
    ("t5_embeddings", "mT5 input token embeddings (shared by encoder and decoder)"),
    ("t5_encoder", "mT5 encoder layers + norm + relpos"),
    ("t5_decoder", "mT5 decoder layers + norm + relpos"),
    ("t5_logits", "mT5 untied output layer (logits_dense)"),
    ("t5", "mT5 total"),
    ("total", "whole captioner"),
)


def _size(tree) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(tree)))


def count_params(config) -> dict:
    """Counts the parameters of each tower of the captioner a config describes.

    Args:
        config: the experiment ConfigDict (with a `model` field) or the model
            ConfigDict itself.

    Returns:
        dict with int counts under 'vit', 'img_proj', 't5_embeddings',
        't5_encoder', 't5_decoder' (without the output layer), 't5_logits',
        't5' (all of mT5) and 'total'.
    """
    model_config = config.model if "model" in config else config
    model = captioner.from_config(model_config)
    params = captioner.abstract_params(model, boxed=False)
    t5 = params["t5"]
    decoder = {k: v for k, v in t5["decoder"].items() if k != "logits_dense"}
    return {
        "vit": _size(params["img"]),
        "img_proj": _size(params["img_proj"]),
        "t5_embeddings": _size(t5["token_embedder"]),
        "t5_encoder": _size(t5["encoder"]),
        "t5_decoder": _size(decoder),
        "t5_logits": _size(t5["decoder"]["logits_dense"]),
        "t5": _size(t5),
        "total": _size(params),
    }


def _variant(model_config, tower: str) -> str:
    """The variant name of a tower ("B/16", "mt5-base"), or "" when unset."""
    sub = model_config.get(tower, None)
    return (sub.get("variant", None) if sub is not None else None) or ""


def _explain(counts: dict, vit_variant: str, t5_variant: str, overridden: bool) -> list:
    """Lines comparing the counts with the paper's figures."""
    lines = []
    if overridden:
        lines.append("Sizes are overridden in the config: the paper's figures do not apply.")
        return lines
    if vit_variant in PAPER_VIT:
        paper = PAPER_VIT[vit_variant]
        lines.append(
            f"ViT-{vit_variant}: {counts['vit'] / 1e6:.1f}M here vs about {paper / 1e6:.0f}M "
            f"in the paper, which counts the backbone without a classifier head at 224 px "
            f"(the figure of the ViT papers). Here too there is no head; pool 'map' would "
            f"add a MAP head, 'tok' a [cls] token, and the position embeddings grow with "
            f"the image size.")
    if t5_variant in PAPER_T5:
        paper = PAPER_T5[t5_variant]
        no_vocab = counts["t5"] - counts["t5_embeddings"] - counts["t5_logits"]
        lines.append(
            f"{t5_variant}: {counts['t5'] / 1e6:.1f}M here vs about {paper / 1e6:.0f}M in the "
            f"paper; {counts['t5_embeddings'] / 1e6:.1f}M of it is the 250k-entry token "
            f"embedding and another {counts['t5_logits'] / 1e6:.1f}M the untied output "
            f"layer, so the transformer layers alone hold {no_vocab / 1e6:.1f}M.")
        if t5_variant == "mt5-base":
            lines.append(
                "mT5-base counted with both vocabulary matrices is 582M (the mT5 paper "
                "says 580M); the Crossmodal-3600 paper's 680M matches neither that nor it "
                "plus ViT-B/16 (668M) exactly, so it is most likely rounded or a typo.")
    return lines


def format_summary(counts: dict, vit_variant: str = "", t5_variant: str = "",
                   overridden: bool = False) -> str:
    """The printed table: one row per tower plus the comparison with the paper.

    Args:
        counts: the output of `count_params`.
        vit_variant: e.g. "B/16", for the comparison.
        t5_variant: e.g. "mt5-base", for the comparison.
        overridden: sizes were overridden, so the paper's figures do not apply.

    Returns:
        The text to print.
    """
    lines = [f"{'part':<16}{'parameters':>16}  what", "-" * 80]
    for key, what in ROWS:
        lines.append(f"{key:<16}{counts[key]:>16,}  {what}")
    lines.append("-" * 80)
    paper = []
    if vit_variant in PAPER_VIT:
        paper.append(f"ViT-{vit_variant} {PAPER_VIT[vit_variant] / 1e6:.0f}M")
    if t5_variant in PAPER_T5:
        paper.append(f"{t5_variant} {PAPER_T5[t5_variant] / 1e6:.0f}M")
    if paper:
        lines.append("Paper (Sec. 3.2): " + ", ".join(paper))
    for line in _explain(counts, vit_variant, t5_variant, overridden):
        lines += textwrap.wrap(line, 100, subsequent_indent="  ")
    return "\n".join(lines)


def _overridden(model_config) -> bool:
    keys = {"vit": ("width", "depth", "mlp_dim", "num_heads"),
            "t5": ("emb_dim", "num_heads", "head_dim", "mlp_dim", "num_encoder_layers",
                   "num_decoder_layers", "vocab_size")}
    for tower, fields in keys.items():
        sub = model_config.get(tower, None)
        if sub is not None and any(sub.get(f, None) is not None for f in fields):
            return True
    return False


def main(argv: list | None = None) -> None:
    """Command-line entry point (absl flags: --config=<file>.py)."""
    from absl import app, flags
    from ml_collections import config_flags

    config_flag = config_flags.DEFINE_config_file(
        "config", None, "Python config file whose get_config() has a `model` field.")
    flags.mark_flags_as_required(["config"])

    def run(_):
        config = config_flag.value
        if "model" not in config:
            raise SystemExit(f"{flags.FLAGS['config'].config_filename}: get_config() has "
                             f"no 'model' field")
        model_config = config.model
        try:
            counts = count_params(config)
        except ValueError as e:
            raise SystemExit(f"{flags.FLAGS['config'].config_filename}: {e}") from e
        vit_variant, t5_variant = _variant(model_config, "vit"), _variant(model_config, "t5")
        print(format_summary(counts, vit_variant, t5_variant, _overridden(model_config)))

    app.run(run, argv=argv or sys.argv)


if __name__ == "__main__":
    main()
