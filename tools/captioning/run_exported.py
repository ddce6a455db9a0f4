"""Captions images with a `python -m tools.captioning.export` file: jax, numpy, PIL, sentencepiece.

    python run_exported.py MODEL.npz IMAGE... [--langs en,es] [--decode greedy|beam|sample]
        [--seed 0]

Prints one JSON line per image and language, {"image/key", "lang", "caption", "image",
"log_prob"}, as `python -m tools.captioning --format jsonl` (all rows in one batch, sampling
from fold_in(key(seed), 0)). Imports nothing of the repository: copy it next to the model file
and run it anywhere with `pip install jax jaxlib numpy pillow sentencepiece flatbuffers`
(jax.export reads its programs with flatbuffers). Bad input is one `error: ...` line and exit
status 2.
"""
import argparse
import json
import os
import signal
import sys
import warnings
import zipfile
import zlib

import jax
import numpy as np
import sentencepiece
from jax import export
from PIL import Image, ImageOps

# What numpy and zipfile raise for a truncated or altered file.
DAMAGED = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error)


def fail(message):
    """Bad input: one `error: ...` line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x)


# What this runner (and tools/captioning/export.py) reads of a manifest: key -> (test, wanted).
_MANIFEST = {
    "image": (lambda x: isinstance(x, dict), "an object"),
    "image.size": (lambda x: _is_int(x) and x >= 1, "an integer >= 1"),
    "image.value_range": (lambda x: isinstance(x, list) and len(x) == 2
                          and all(map(_is_number, x)), "two finite numbers"),
    "image.upright": (lambda x: isinstance(x, bool), "true or false"),
    "image.jpeg_draft": (lambda x: isinstance(x, bool), "true or false"),
    "image.background": (lambda x: isinstance(x, list) and len(x) == 3
                         and all(_is_int(v) and 0 <= v <= 255 for v in x),
                         "three integers in [0, 255]"),
    "max_len": (lambda x: _is_int(x) and x >= 1, "an integer >= 1"),
    "eos_id": (lambda x: _is_int(x) and x >= 0, "an integer >= 0"),
    "prompts": (lambda x: isinstance(x, dict) and x and all(
        isinstance(ids, list) and ids and all(map(_is_int, ids)) for ids in x.values()),
        "an object of languages' token id lists"),
    "programs": (lambda x: isinstance(x, dict) and x
                 and all(isinstance(v, dict) for v in x.values()),
                 "an object of decoding methods' settings"),
    "num_params": (lambda x: _is_int(x) and x >= 0, "an integer >= 0"),
    "source": (lambda x: isinstance(x, dict) and "step" in x and "workdir" in x,
               "an object with step and workdir"),
}
_MISSING = object()


def manifest_problem(info):
    """What is wrong with an export's manifest (a dict) for reading it, or None."""
    for key, (test, wanted) in _MANIFEST.items():
        value = info
        for part in key.split("."):
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        if value is _MISSING:
            return f"its manifest has no {key}"
        if not test(value):
            return f"its manifest's {key} is {json.dumps(value)[:80]}, not {wanted}"
    return None


def not_a_file(path, what):
    """The problem of a `path` that exists but is no regular file (a folder, a FIFO: reading
    it would fail or wait forever), or None."""
    if os.path.exists(path) and not os.path.isfile(path):
        return f"{what} {path} is not a regular file"
    return None


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


def read_image(path, spec):
    """`pixels`, or an error line naming the file."""
    problem = not_a_file(path, "image file")
    if problem:
        fail(problem)
    try:
        with warnings.catch_warnings():  # PIL's over 89 megapixels; it refuses over twice that.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return pixels(path, spec)
    except FileNotFoundError:
        fail(f"image file not found: {path}")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        fail(f"cannot decode image {path}: {str(e).splitlines()[0]}")


def load(path, method):
    """(manifest, parameters, program, vocabulary) of an export; an error line if none."""
    problem = not_a_file(path, "exported model")
    if problem:
        fail(problem)
    try:
        archive = np.load(path)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an .npz archive")
        info = json.loads(archive["manifest"].tobytes())
    except FileNotFoundError:
        fail(f"exported model {path} not found")
    except (*DAMAGED, AttributeError) as e:
        fail(f"{path} is not an exported captioner ({str(e).splitlines()[0] if str(e) else e})")
    if not isinstance(info, dict) or (info.get("format"), info.get("version")) != (
            "xm3600-captioner", 1):
        fail(f"{path} is not an xm3600-captioner file of version 1")
    problem = manifest_problem(info)
    if problem:
        fail(f"{path} is damaged: {problem}")
    if method not in info["programs"]:
        fail(f"--decode {method}: {path} has programs {', '.join(info['programs'])}")
    try:
        params = [archive[f"param_{i:05d}"] for i in range(info["num_params"])]
        program = export.deserialize(bytearray(archive[f"program_{method}"]))
        vocab = sentencepiece.SentencePieceProcessor(model_proto=archive["vocab"].tobytes())
    except ImportError as e:  # jax.export reads programs with flatbuffers, installed apart.
        fail(f"{e} (pip install flatbuffers)")
    except Exception as e:  # noqa: BLE001  Whatever a damaged member makes its reader raise.
        fail(f"{path} is damaged ({str(e).splitlines()[0] if str(e) else repr(e)})")
    for i, (param, aval) in enumerate(zip(params, program.in_avals, strict=False)):
        if tuple(param.shape) != tuple(aval.shape) or param.dtype != aval.dtype:
            fail(f"{path} is damaged: param_{i:05d} is {param.dtype}{list(param.shape)}, "
                 f"its {method} program takes {aval.dtype}{list(aval.shape)}")
    return info, params, program, vocab


def caption(args):
    """Prints the captions of the arguments' images (an error line for bad input)."""
    info, params, program, vocab = load(args.model, args.decode)
    langs = list(dict.fromkeys(args.langs.split(",")))  # A code given twice counts once.
    unknown = [lang for lang in langs if lang not in info["prompts"]]
    if unknown:
        fail(f"--langs: unknown language {unknown[0]!r}; known: "
                      f"{', '.join(info['prompts'])}")
    rows = [(path, lang) for path in args.images for lang in langs]
    images = {path: read_image(path, info["image"]) for path in args.images}
    prompts = np.stack([np.asarray(info["prompts"][lang], np.int32) for _, lang in rows])
    rng = jax.random.key_data(jax.random.fold_in(jax.random.key(args.seed), 0))
    tokens, log_probs = program.call(params, np.stack([images[p] for p, _ in rows]), prompts,
                                     rng)
    eos = info["eos_id"]
    for (path, lang), ids, log_prob in zip(rows, np.asarray(tokens).tolist(),
                                           np.asarray(log_probs), strict=True):
        ids = [i for i in ids[:ids.index(eos) if eos in ids else None]
               if 0 < i < vocab.get_piece_size()]
        key = os.path.splitext(os.path.basename(path))[0]
        print(json.dumps({"image/key": key, "lang": lang, "caption": vocab.decode_ids(ids),
                          "image": path, "log_prob": round(float(log_prob), 4)},
                         ensure_ascii=False))


class _ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one `error:` line and exit status 2."""

    def error(self, message):
        fail(f"{message} (see {self.prog} --help)")


def main(own_process=False):
    """The command line; `own_process`: the process is this command's, so once every caption
    is printed a late Ctrl-C or SIGTERM is ignored (the run exits 0)."""
    parser = _ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("images", nargs="+")
    parser.add_argument("--langs", default="en",
                        help="comma-separated codes (default en); a code given twice counts once")
    parser.add_argument("--decode", default="greedy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not 0 <= args.seed < 2**32:
        parser.error(f"--seed must be in [0, 2**32 - 1], got {args.seed}")
    try:
        caption(args)
        sys.stdout.flush()
        if own_process:
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)
    except KeyboardInterrupt:
        print("stopped (Ctrl-C)", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main(own_process=True)
