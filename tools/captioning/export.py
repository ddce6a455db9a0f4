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
The file is written whole or not at all (files.replacing).
"""

import dataclasses
import json
import os
import zipfile
import zlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export

import errors
import files
from data import images as image_lib
from data import tokenizer
from errors import InputError
from model import decode
from tools.captioning import arguments, restore, run_exported
from tools.captioning import decoding as decoding_lib
from tools.captioning.arguments import ArgumentParser

FORMAT = "xm3600-captioner"
FORMAT_VERSION = 1
PLATFORMS = ("cpu", "cuda")


def _param_key(i):
    return f"param_{i:05d}"


def _bytes(data):
    return np.frombuffer(data, np.uint8)


def program_settings(decoding):
    """The manifest's settings of a decoding's program (the seed is an input, not a setting)."""
    settings = decoding.as_dict()
    del settings["method"]
    settings.pop("seed", None)
    return settings


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
        decodings: `model.decode.Decoding`s of distinct methods.
        platforms: where the programs may run.

    Returns:
        The manifest written.
    """
    methods = [d.method for d in decodings]
    if len(set(methods)) != len(methods):
        raise InputError(f"one program per decoding method, got {', '.join(methods)}")
    for d in decodings:
        decoding_lib.check_logits(d, run.model.config.t5.vocab_size)
    arrays = {"manifest": None, "vocab": _bytes(run.vocab.model_proto)}
    for d in decodings:
        arrays[f"program_{d.method}"] = _bytes(export_program(run, d, platforms).serialize())
    for i, leaf in enumerate(jax.tree.leaves(run.params)):
        arrays[_param_key(i)] = np.asarray(leaf)
    info = manifest(run, decodings, platforms)
    arrays["manifest"] = _bytes(json.dumps(info, indent=1).encode())
    with files.replacing(path, "wb") as f:
        np.savez(f, **arrays)
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
        InputError: no such file, not an exported captioner (or a truncated one), another
            format version, or parameters that do not fit its programs.
    """
    if not os.path.exists(path):
        raise InputError(f"exported model {path} not found")
    problem = run_exported.not_a_file(path, "exported model")
    if problem:
        raise InputError(problem)
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an .npz archive")
        info = json.loads(archive["manifest"].tobytes())
        if not isinstance(info, dict):
            raise ValueError("the manifest is not a JSON object")
    except (*_DAMAGED, AttributeError) as e:  # np.load: a pickle's or a .npy's errors.
        raise InputError(f"{path} is not an exported captioner ({_gist(e)})") from None
    if info.get("format") != FORMAT:
        raise InputError(f"{path} is not an exported captioner (format "
                         f"{info.get('format')!r}, expected {FORMAT!r})")
    if info.get("version") != FORMAT_VERSION:
        raise InputError(f"{path} is format version {info.get('version')}; this code reads "
                         f"version {FORMAT_VERSION}: export the run again with python -m "
                         f"tools.captioning.export")
    problem = run_exported.manifest_problem(info)
    if problem is None:
        try:
            for method, settings in info["programs"].items():
                decode.Decoding.create(method, settings, "{}")
        except (TypeError, ValueError) as e:
            problem = f"its manifest's programs: {e}"
    if problem:
        raise InputError(f"{path} is damaged: {problem}")
    try:
        params = [archive[_param_key(i)] for i in range(info["num_params"])]
        programs = {m: _program(path, archive[f"program_{m}"], m) for m in info["programs"]}
        vocab = tokenizer.Vocabulary(archive["vocab"].tobytes(), f"{path}:vocab")
    except (*_DAMAGED, TypeError) as e:
        raise InputError(f"{path} is damaged ({_gist(e)})") from None
    for method, program in programs.items():
        _check_params(path, params, program, method)
    return Exported(path, info, params, vocab, programs)


def _program(path, data, method):
    """The `jax.export` program of `method` from its bytes, or InputError naming the member."""
    try:
        return jax_export.deserialize(bytearray(data))
    except ImportError:
        raise  # flatbuffers missing: not the file's fault.
    except Exception as e:  # noqa: BLE001  Flatbuffers' readers raise struct.error, IndexError...
        raise InputError(f"{path} is damaged: its program_{method} is not a jax.export "
                         f"program ({_gist(e)})") from None


# What numpy and zipfile raise for a truncated or altered file.
_DAMAGED = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error)


def _gist(error):
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__


def _check_params(path, params, program, method):
    """InputError when a parameter's shape or dtype is not what `program` takes."""
    for i, (param, aval) in enumerate(zip(params, program.in_avals, strict=False)):
        if tuple(param.shape) != tuple(aval.shape) or param.dtype != aval.dtype:
            raise InputError(f"{path} is damaged: {_param_key(i)} is {param.dtype}"
                             f"{list(param.shape)}, its {method} program takes {aval.dtype}"
                             f"{list(aval.shape)}")


def main(argv=None, own_process=False):
    """Command line: see the module docstring (bad input raises an `errors.Error`);
    `own_process`: the process is this command's (see `arguments.finished`)."""
    parser = ArgumentParser(
        prog="python -m tools.captioning.export",
        description="Exports a run's captioner as one file that runs without this repository "
                    "(tools/captioning/run_exported.py).")
    parser.add_argument("--workdir", required=True, help="the run's folder")
    parser.add_argument("--step", default=None,
                        help="checkpoint: a step, 'best' (checkpoints_best/), default the latest")
    parser.add_argument("--out", required=True, help="the .npz file to write")
    parser.add_argument("--beam_size", type=int, default=None,
                        help="the beam program's beams (default 4)")
    parser.add_argument("--alpha", type=float, default=None,
                        help="the beam program's length-penalty exponent (default 0.6)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="the sampling program's temperature (default 1.0)")
    parser.add_argument("--top_k", type=int, default=None,
                        help="the sampling program's top-k (default 0: all)")
    parser.add_argument("--max_len", type=int, default=None,
                        help="decoding length (default: the run's data.max_target_len)")
    args = parser.parse_args(argv)
    decodings = [decode.Decoding.create(method, {k: getattr(args, k) for k in names}, "--{}")
                 for method, names in (("greedy", ()), ("beam", ("beam_size", "alpha")),
                                       ("sample", ("temperature", "top_k")))]
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise InputError(f"--out {args.out}: its folder does not exist")
    if args.max_len is not None and args.max_len < 1:
        raise InputError(f"--max_len must be >= 1, got {args.max_len}")
    run = restore.restore(args.workdir, args.step, max_len=args.max_len)
    try:
        info = write(run, args.out, decodings)
    except OSError as e:
        raise InputError(f"--out {args.out}: {e.strerror or e}") from None
    arguments.finished(own_process)
    size = os.path.getsize(args.out)
    print(f"wrote {args.out} ({size / 2**20:.2f} MiB): step {run.step} of {args.workdir}, "
          f"{len(info['prompts'])} languages, programs "
          f"{', '.join(d.describe(seed=False) for d in decodings)}")
    return 0


if __name__ == "__main__":
    errors.run_main(main, None, True)
