r"""An exported captioner: the decoding programs (StableHLO), parameters, vocabulary, settings.

    python -m tools.captioning.export --workdir runs/demo [--step N|best] --out demo_captioner.npz \
        [--beam_size 4] [--alpha 0.6] [--temperature 1.0] [--top_k 0] [--max_len N]

writes one `.npz` file (numpy's zip of arrays) holding

- `manifest`: JSON (as uint8 bytes): `format` "xm3600-captioner" and `version` (FORMAT_VERSION),
  the image preprocessing (size, resize, value range, EXIF orientation, background of
  transparent pixels, JPEG draft decoding), `max_len`, `eos_id`, the LangId prompt ids of
  every language, the programs and their settings, the parameter count, the source run;
- `vocab`: the SentencePiece model's bytes (to turn ids into text);
- `program_greedy`, `program_beam`, `program_sample`: `jax.export` serializations of
  tools/captioning/decoding.predict_fn for CPU and CUDA, any batch size:
  fn(params, images float32 [b, S, S, 3], prompts int32 [b, Lp], rng uint32 [2])
  -> (tokens int32 [b, max_len], log_probs float32 [b]), `params` the list `param_00000`,
  `param_00001`, ... in order.

tools/captioning/run_exported.py reads and runs it with jax, numpy, PIL and sentencepiece alone.
The file is written to a temporary name and renamed when complete.
"""

import dataclasses
import json
import os
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export

from data import images as image_lib
from data import tokenizer
from errors import InputError
from tools.captioning import decoding as decoding_lib
from tools.captioning import restore
from tools.captioning.arguments import ArgumentParser

FORMAT = "xm3600-captioner"
FORMAT_VERSION = 1
PLATFORMS = ("cpu", "cuda")


def _param_key(i):
    return f"param_{i:05d}"


def _bytes(data):
    return np.frombuffer(data, np.uint8)


def program_settings(decoding):
    """The manifest's settings of a decoding's program."""
    if decoding.method == "beam":
        return {"beam_size": decoding.beam_size, "alpha": decoding.alpha}
    if decoding.method == "sample":
        return {"temperature": decoding.temperature, "top_k": decoding.top_k}
    return {}


def export_program(run, decoding, platforms=PLATFORMS):
    """`jax.export` of the run's predict_fn for `decoding`, over a list of parameters."""
    leaves, treedef = jax.tree.flatten(run.params)
    fn = decoding_lib.predict_fn(run.model, decoding, run.max_len)

    def flat_fn(flat_params, images, prompts, rng):
        return fn(jax.tree.unflatten(treedef, flat_params), images, prompts, rng)

    batch, = jax_export.symbolic_shape("b")
    size, prompt_len = run.image_size, len(next(iter(run.prompts.values())))
    args = ([jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves],
            jax.ShapeDtypeStruct((batch, size, size, 3), jnp.float32),
            jax.ShapeDtypeStruct((batch, prompt_len), jnp.int32),
            jax.ShapeDtypeStruct((2,), jnp.uint32))
    return jax_export.export(jax.jit(flat_fn), platforms=platforms)(*args)


def manifest(run, decodings, platforms=PLATFORMS):
    """The manifest of an export of `run` with `decodings` (see the module docstring)."""
    return {
        "format": FORMAT, "version": FORMAT_VERSION,
        "jax_version": jax.__version__, "platforms": list(platforms),
        "source": {"workdir": os.path.abspath(run.workdir), "step": run.step,
                   "best": run.best},
        "image": {"size": run.image_size, "resize": "bilinear", "value_range": [-1.0, 1.0],
                  "upright": True, "background": list(image_lib.BACKGROUND),
                  "jpeg_draft": True},
        "max_len": run.max_len, "eos_id": tokenizer.EOS_ID,
        "prompts": {lang: [int(i) for i in p] for lang, p in run.prompts.items()},
        "programs": {d.method: program_settings(d) for d in decodings},
        "num_params": len(jax.tree.leaves(run.params)),
    }


def write(run, path, decodings, platforms=PLATFORMS):
    """Exports `run` with one program per decoding into the file `path`.

    Args:
        run: a restore.Run.
        path: the `.npz` file to write (replaced only once complete).
        decodings: `decoding.Decoding`s of distinct methods.
        platforms: where the programs may run.

    Returns:
        The manifest written.
    """
    methods = [d.method for d in decodings]
    if len(set(methods)) != len(methods):
        raise InputError(f"one program per decoding method, got {', '.join(methods)}")
    for d in decodings:
        d.check_logits(run.model.config.t5.vocab_size)
    arrays = {"manifest": None, "vocab": _bytes(run.vocab.model_proto)}
    for d in decodings:
        arrays[f"program_{d.method}"] = _bytes(export_program(run, d, platforms).serialize())
    for i, leaf in enumerate(jax.tree.leaves(run.params)):
        arrays[_param_key(i)] = np.asarray(leaf)
    info = manifest(run, decodings, platforms)
    arrays["manifest"] = _bytes(json.dumps(info, indent=1).encode())
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)
    return info


@dataclasses.dataclass(frozen=True)
class Exported:
    """An exported captioner as read back: manifest, parameters, vocabulary, programs."""
    path: str
    manifest: dict
    params: list
    vocab: Any
    programs: dict  # method -> jax.export.Exported

    def settings(self, method):
        return self.manifest["programs"][method]


def load(path):
    """Reads an exported captioner written by `write`.

    Raises:
        InputError: no such file, not an exported captioner, or another format version.
    """
    if not os.path.isfile(path):
        raise InputError(f"exported model {path} not found")
    try:
        archive = np.load(path, allow_pickle=False)
        info = json.loads(archive["manifest"].tobytes())
        if not isinstance(info, dict):
            raise ValueError("the manifest is not a JSON object")
    except (OSError, ValueError, KeyError) as e:  # zipfile.BadZipFile is an OSError.
        raise InputError(f"{path} is not an exported captioner ({e})") from None
    if info.get("format") != FORMAT:
        raise InputError(f"{path} is not an exported captioner (format "
                         f"{info.get('format')!r}, expected {FORMAT!r})")
    if info.get("version") != FORMAT_VERSION:
        raise InputError(f"{path} is format version {info.get('version')}; this code reads "
                         f"version {FORMAT_VERSION}: export the run again with python -m "
                         f"tools.captioning.export")
    try:
        params = [archive[_param_key(i)] for i in range(info["num_params"])]
        programs = {m: jax_export.deserialize(bytearray(archive[f"program_{m}"]))
                    for m in info["programs"]}
        vocab = restore.Vocabulary(archive["vocab"].tobytes(), f"{path}:vocab")
    except (KeyError, ValueError) as e:
        raise InputError(f"{path} is damaged ({e})") from None
    return Exported(path, info, params, vocab, programs)


def main(argv=None):
    """Command line: see the module docstring."""
    parser = ArgumentParser(
        prog="python -m tools.captioning.export",
        description="Exports a run's captioner as one file that runs without this repository "
                    "(tools/captioning/run_exported.py).")
    parser.add_argument("--workdir", required=True, help="the run's folder")
    parser.add_argument("--step", default=None,
                        help="checkpoint: a step, 'best' (checkpoints_best/), default the latest")
    parser.add_argument("--out", required=True, help="the .npz file to write")
    parser.add_argument("--beam_size", type=int, default=4, help="the beam program's beams")
    parser.add_argument("--alpha", type=float, default=0.6,
                        help="the beam program's length-penalty exponent")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="the sampling program's temperature")
    parser.add_argument("--top_k", type=int, default=0, help="the sampling program's top-k")
    parser.add_argument("--max_len", type=int, default=None,
                        help="decoding length (default: the run's data.max_target_len)")
    args = parser.parse_args(argv)
    try:
        decodings = [decoding_lib.Decoding("greedy"),
                     decoding_lib.Decoding("beam", beam_size=args.beam_size, alpha=args.alpha),
                     decoding_lib.Decoding("sample", temperature=args.temperature,
                                           top_k=args.top_k)]
        if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
            raise InputError(f"--out {args.out}: its folder does not exist")
        run = restore.restore(args.workdir, args.step, max_len=args.max_len)
        info = write(run, args.out, decodings)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    size = os.path.getsize(args.out)
    print(f"wrote {args.out} ({size / 2**20:.1f} MiB): step {run.step} of {args.workdir}, "
          f"{len(info['prompts'])} languages, programs "
          f"{', '.join(d.describe(seed=False) for d in decodings)}")
    return 0


if __name__ == "__main__":
    main()
