"""Tests of the parameter-count summary against hand-derived formulas."""

import pathlib
import subprocess
import sys
import textwrap

import ml_collections

from tools import model_summary as summary

REPO = pathlib.Path(__file__).resolve().parents[2]

CONFIG_FILE = """
import ml_collections


def get_config():
    c = ml_collections.ConfigDict()
    c.model = ml_collections.ConfigDict(dict(
        image_size=224, fusion="pooled", vit=dict(variant="B/16", pool="gap"),
        t5=dict(variant="mt5-base")))
    return c
"""


def _vit_count(width, depth, mlp, patch, num_patches):
    """ViT backbone without head: stem, position embeddings, blocks, final norm."""
    block = (4 * (width * width + width)  # q, k, v, out with biases
             + 2 * 2 * width              # two LayerNorms
             + width * mlp + mlp + mlp * width + width)
    return patch * patch * 3 * width + width + num_patches * width + depth * block + 2 * width


def _t5_counts(vocab, emb, heads, head_dim, mlp, enc_layers, dec_layers):
    attention = 4 * emb * heads * head_dim
    gated_mlp = 3 * emb * mlp
    encoder = enc_layers * (attention + gated_mlp + 2 * emb) + emb + heads * 32
    decoder = dec_layers * (2 * attention + gated_mlp + 3 * emb) + emb + heads * 32
    return vocab * emb, encoder, decoder


def test_bb_counts_match_hand_formulas():
    config = ml_collections.ConfigDict(dict(model=dict(
        image_size=224, vit=dict(variant="B/16"), t5=dict(variant="mt5-base"))))
    counts = summary.count_params(config)
    assert counts["vit"] == _vit_count(768, 12, 3072, 16, 196) == 85_797_120
    embeddings, encoder, decoder = _t5_counts(250112, 768, 12, 64, 2048, 12, 12)
    assert counts["t5_embeddings"] == counts["t5_logits"] == embeddings
    assert (counts["t5_encoder"], counts["t5_decoder"]) == (encoder, decoder)
    assert counts["t5"] == 2 * embeddings + encoder + decoder  # the mT5 paper's ~580M
    assert abs(counts["t5"] - 580e6) < 5e6
    assert counts["img_proj"] == 768 * 768 + 768
    assert counts["total"] == counts["vit"] + counts["img_proj"] + counts["t5"]


def test_lg_counts_match_the_paper():
    # scan=True traces one layer per stack instead of 40 + 24 + 24; same counts.
    config = ml_collections.ConfigDict(dict(
        image_size=224, vit=dict(variant="g/14"), t5=dict(variant="mt5-large"), scan=True))
    counts = summary.count_params(config)  # a model ConfigDict works too
    assert counts["vit"] == _vit_count(1408, 40, 6144, 14, 256)
    assert abs(counts["vit"] - 1011e6) < 1e6 and abs(counts["t5"] - 1230e6) < 1e6
    text = summary.format_summary(counts, "g/14", "mt5-large")
    assert "ViT-g/14 1011M" in text and "mt5-large 1230M" in text


def test_command_line_prints_table_with_overrides(tmp_path):
    path = tmp_path / "bb.py"
    path.write_text(textwrap.dedent(CONFIG_FILE))
    result = subprocess.run(
        [sys.executable, "-m", "tools.model_summary", f"--config={path}",
         "--config.model.t5.variant=mt5-small"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()
             if line[:1].isalpha() and len(line.split()) > 1 and line.split()[1][0].isdigit()}
    embeddings, encoder, decoder = _t5_counts(250112, 512, 6, 64, 1024, 8, 8)
    assert int(lines["t5"].replace(",", "")) == 2 * embeddings + encoder + decoder
    assert int(lines["vit"].replace(",", "")) == 85_797_120
    assert "ViT-B/16 86M" in result.stdout


def test_command_line_reports_bad_config(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(CONFIG_FILE.replace('"mt5-base"', '"mt5-giant"'))
    result = subprocess.run([sys.executable, "-m", "tools.model_summary", f"--config={path}"],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode != 0
    assert "bad.py" in result.stderr and "mt5-giant" in result.stderr
