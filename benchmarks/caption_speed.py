r"""Captions per second of the captioning API on a trained run, and of its export, side by side.

    python benchmarks/caption_speed.py --workdir runs/demo --images demo_data/xm3600/images \
        [--num_images 64] [--langs en] [--beam_size 4] [--repeats 10] \
        [--minimal_venv VENV/bin/python]

Exports the run's latest checkpoint as `python -m tools.captioning.export` does by default
(greedy, beam search and sampling programs, into a temporary folder: its size is printed),
then captions the first `--num_images` images of `--images`
(files, folders or patterns, as the command line takes them) in one batch per language,
greedy and with beam search, with the run's captioner (tools.captioning.Captioner.from_run) and
with the exported one (Captioner.from_exported), alternating the two in every repeat so that
both see the same machine. A run is the API end to end: reading and preprocessing the
images, decoding, scoring, detokenizing. The first call of each compiles and is reported
apart; captions/s is of the best repeat, and the last column is export / run.

With `--minimal_venv`, the python of a virtual environment holding only the packages
docs/captioning.md lists for the export (`pip install jax==0.10.2 ...`): there
tools/captioning/run_exported.py's functions read the same images and run the same programs
(reading and preprocessing the images, decoding, detokenizing), timed the same way.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import jax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import errors  # noqa: E402
from errors import InputError  # noqa: E402
from tools.captioning import Captioner, Decoding, export, inputs, restore, run_exported  # noqa: E402

# Run by the minimal venv's python: run_exported.py's work on every row, timed.
_IN_VENV = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import jax
import numpy as np
import run_exported as r
path, images, langs = sys.argv[2], sys.argv[3].split("|"), sys.argv[4].split(",")
repeats = int(sys.argv[5])
out = {}
for method in sys.argv[6].split(","):
    info, params, program, vocab = r.load(path, method)
    prompts = np.stack([np.asarray(info["prompts"][l], np.int32) for _ in images for l in langs])
    rng = jax.random.key_data(jax.random.fold_in(jax.random.key(0), 0))
    def once():
        start = time.perf_counter()
        pixels = np.stack([r.read_image(p, info["image"]) for p in images for _ in langs])
        tokens, _ = program.call(params, pixels, prompts, rng)
        texts = [vocab.decode_ids([i for i in ids if 1 < i < vocab.get_piece_size()])
                 for ids in np.asarray(tokens).tolist()]
        return time.perf_counter() - start
    first = once()
    out[method] = [first, min(once() for _ in range(repeats))]
print(json.dumps(out))
"""


def in_minimal_venv(python, path, images, langs, methods, repeats):
    """{method: [first call s, best call s]} of run_exported.py's functions under `python`,
    run from a folder holding run_exported.py alone."""
    with tempfile.TemporaryDirectory() as folder:
        runner = os.path.join(folder, "run_exported.py")
        with open(run_exported.__file__, encoding="utf-8") as f, open(runner, "w") as g:
            g.write(f.read())
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        result = subprocess.run(
            [python, "-c", _IN_VENV, folder, path, "|".join(map(os.path.abspath, images)),
             ",".join(langs),
             str(repeats), ",".join(methods)], cwd=folder, env=env, capture_output=True,
            text=True)
    if result.returncode:
        raise errors.RunError(f"--minimal_venv {python}: {result.stderr.strip()[-500:]}")
    return json.loads(result.stdout)


def _timed(captioner, images, langs, decoding):
    """(seconds, captions) of one call of the API, all rows in one batch."""
    start = time.perf_counter()
    captions = captioner.caption(images, langs, decoding, batch_size=len(images) * len(langs))
    return time.perf_counter() - start, captions


def measure(captioners, images, langs, decodings, repeats):
    """{(name, decoding): [compile + first run s, best run s, captions]}, alternating."""
    out = {}
    for decoding in decodings:
        for name, captioner in captioners.items():
            out[name, decoding] = [*_timed(captioner, images, langs, decoding)]
            out[name, decoding].insert(1, float("inf"))
        for _ in range(repeats):
            for name, captioner in captioners.items():
                seconds, _ = _timed(captioner, images, langs, decoding)
                out[name, decoding][1] = min(out[name, decoding][1], seconds)
    return out


def _report(args, run, images, langs, decodings, size, export_s, results, venv):
    rows = len(images) * len(langs)
    print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), "
          f"{os.cpu_count()} CPUs; {run.source}; {len(images)} images x {len(langs)} "
          f"language(s) = {rows} captions per call, one batch, best of {args.repeats}")
    print(f"export: {size / 2**20:.2f} MiB ({size} bytes; greedy, beam and sampling programs "
          f"as python -m tools.captioning.export writes them), written in {export_s:.1f} s")
    print(f"{'decoding':34s}{'model':>14s}{'compile s':>11s}{'run s':>8s}{'captions/s':>12s}"
          f"{'export/run':>12s}")
    for decoding in decodings:
        times = {name: results[name, decoding][:2] for name in ("run", "export")}
        if decoding.method in venv:
            times["minimal venv"] = venv[decoding.method]
        for name, (first, best) in times.items():
            ratio = f"{times['run'][1] / best:>12.2f}" if name != "run" else ""
            print(f"{decoding.describe():34s}{name:>14s}{first - best:>11.2f}{best:>8.3f}"
                  f"{rows / best:>12.1f}{ratio}")
        same = [c.tokens for c in results["run", decoding][2]] == \
            [c.tokens for c in results["export", decoding][2]]
        print(f"  the export's captions equal the run's token for token: {same}")


def main(argv=None):
    """Command-line entry point (bad input raises an `errors.Error`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True, help="a trained run's folder")
    parser.add_argument("--images", nargs="+", required=True,
                        help="image files, folders or patterns")
    parser.add_argument("--num_images", type=int, default=64)
    parser.add_argument("--langs", default="en")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--minimal_venv", default=None,
                        help="python of a venv with only the export's documented packages")
    args = parser.parse_args(argv)
    if args.num_images < 1 or args.repeats < 1:
        raise InputError("--num_images and --repeats must be >= 1")
    images = inputs.expand(args.images)[:args.num_images]
    if len(images) < args.num_images:
        raise InputError(f"--images has {len(images)} images, fewer than --num_images "
                         f"{args.num_images}")
    # The documented command's three programs; sampling is in the file, not timed.
    decodings = [Decoding("greedy"), Decoding("beam", beam_size=args.beam_size),
                 Decoding("sample")]
    timed = decodings[:2]
    run = Captioner.from_run(args.workdir)
    langs = run.check_langs(args.langs)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "captioner.npz")
        start = time.perf_counter()
        export.write(restore.restore(args.workdir), path, decodings)
        export_s = time.perf_counter() - start
        size = os.path.getsize(path)
        exported = Captioner.from_exported(path)
        results = measure({"run": run, "export": exported}, images, langs, timed, args.repeats)
        venv = in_minimal_venv(args.minimal_venv, path, images, langs,
                               [d.method for d in timed], args.repeats) \
            if args.minimal_venv else {}
    _report(args, run, images, langs, timed, size, export_s, results, venv)
    return 0


if __name__ == "__main__":
    errors.run_main(main)
