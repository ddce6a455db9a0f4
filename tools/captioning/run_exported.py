"""Captions images with a `python -m tools.captioning.export` file: jax, numpy, PIL, sentencepiece.

    python run_exported.py MODEL.npz IMAGE... [--langs en,es] [--decode greedy|beam|sample]
        [--seed 0]

Prints one JSON line per image and language: {"image", "lang", "caption", "log_prob"}, as
`python -m tools.captioning --format jsonl` (all rows in one batch, sampling from fold_in(key(seed),
0)). Imports nothing of the repository: copy it next to the model file and run it anywhere.
"""
import argparse
import json
import sys

import jax
import numpy as np
import sentencepiece
from jax import export
from PIL import Image, ImageOps


def pixels(path, spec):
    """The image as the model's input, preprocessed as the manifest's "image" says."""
    size, (low, high) = spec["size"], spec["value_range"]
    image = Image.open(path)
    if image.format == "JPEG" and spec["jpeg_draft"]:
        image.draft("RGB", (size, size))  # DCT-domain downscaling, as data/images.py
    if spec["upright"]:
        image = ImageOps.exif_transpose(image)
    if image.mode.startswith("I"):  # 16-bit grayscale
        scaled = np.clip(np.asarray(image, np.float64), 0, 65535) / 257.0
        image = Image.fromarray(np.round(scaled).astype(np.uint8), "L")
    if image.mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in image.info:
        image = image.convert("RGBA")
        background = Image.new("RGBA", image.size, tuple(spec["background"]) + (255,))
        image = Image.alpha_composite(background, image)
    x = np.asarray(image.convert("RGB").resize((size, size), Image.BILINEAR)).astype(np.float32)
    x *= (high - low) / 255.0
    x += low
    return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("images", nargs="+")
    parser.add_argument("--langs", default="en")
    parser.add_argument("--decode", default="greedy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    archive = np.load(args.model)
    info = json.loads(archive["manifest"].tobytes())
    if (info.get("format"), info.get("version")) != ("xm3600-captioner", 1):
        print(f"error: {args.model} is not an xm3600-captioner file of version 1",
              file=sys.stderr)
        sys.exit(2)
    params = [archive[f"param_{i:05d}"] for i in range(info["num_params"])]
    program = export.deserialize(bytearray(archive[f"program_{args.decode}"]))
    vocab = sentencepiece.SentencePieceProcessor(model_proto=archive["vocab"].tobytes())
    rows = [(path, lang) for path in args.images for lang in args.langs.split(",")]
    images = np.stack([pixels(path, info["image"]) for path, _ in rows])
    prompts = np.stack([np.asarray(info["prompts"][lang], np.int32) for _, lang in rows])
    rng = jax.random.key_data(jax.random.fold_in(jax.random.key(args.seed), 0))
    tokens, log_probs = program.call(params, images, prompts, rng)
    eos = info["eos_id"]
    for (path, lang), ids, log_prob in zip(rows, np.asarray(tokens).tolist(),
                                           np.asarray(log_probs), strict=True):
        ids = [i for i in ids[:ids.index(eos) if eos in ids else None]
               if 0 < i < vocab.get_piece_size()]
        print(json.dumps({"image": path, "lang": lang, "caption": vocab.decode_ids(ids),
                          "log_prob": round(float(log_prob), 4)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
