r"""Captions per second of the captioning API on a trained run, and of its export, side by side.

    python benchmarks/caption_speed.py --workdir runs/demo --images demo_data/xm3600/images \
        [--num_images 64] [--langs en] [--beam_size 4] [--repeats 10]

Exports the run's latest checkpoint (python -m tools.captioning.export's file, into a temporary
folder: its size is printed), then captions the first `--num_images` images of `--images`
(files, folders or patterns, as the command line takes them) in one batch per language,
greedy and with beam search, with the run's captioner (tools.captioning.Captioner.from_run) and
with the exported one (Captioner.from_exported), alternating the two in every repeat so that
both see the same machine. A run is the API end to end: reading and preprocessing the
images, decoding, scoring, detokenizing. The first call of each compiles and is reported
apart; captions/s is of the best repeat, and the last column is export / run.
"""

import argparse
import os
import sys
import tempfile
import time

import jax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from errors import InputError  # noqa: E402
from tools.captioning import Captioner, Decoding, export, inputs, restore  # noqa: E402


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


def main(argv=None):
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True, help="a trained run's folder")
    parser.add_argument("--images", nargs="+", required=True,
                        help="image files, folders or patterns")
    parser.add_argument("--num_images", type=int, default=64)
    parser.add_argument("--langs", default="en")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        if args.num_images < 1 or args.repeats < 1:
            raise InputError("--num_images and --repeats must be >= 1")
        images = inputs.expand(args.images)[:args.num_images]
        if len(images) < args.num_images:
            raise InputError(f"--images has {len(images)} images, fewer than --num_images "
                             f"{args.num_images}")
        decodings = [Decoding("greedy"), Decoding("beam", beam_size=args.beam_size)]
        run = Captioner.from_run(args.workdir)
        langs = run.check_langs(args.langs)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "captioner.npz")
            start = time.perf_counter()
            export.write(restore.restore(args.workdir), path, decodings)
            export_s = time.perf_counter() - start
            size = os.path.getsize(path)
            exported = Captioner.from_exported(path)
            results = measure({"run": run, "export": exported}, images, langs, decodings,
                              args.repeats)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)

    rows = len(images) * len(langs)
    print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), "
          f"{os.cpu_count()} CPUs; {run.source}; {len(images)} images x {len(langs)} "
          f"language(s) = {rows} captions per call, one batch, best of {args.repeats}")
    print(f"export: {size / 2**20:.2f} MiB ({size} bytes), written in {export_s:.1f} s")
    print(f"{'decoding':34s}{'model':>8s}{'compile s':>11s}{'run s':>8s}{'captions/s':>12s}"
          f"{'export/run':>12s}")
    for decoding in decodings:
        for name in ("run", "export"):
            first, best, _ = results[name, decoding]
            ratio = results["run", decoding][1] / best if name == "export" else None
            print(f"{decoding.describe():34s}{name:>8s}{first - best:>11.2f}{best:>8.3f}"
                  f"{rows / best:>12.1f}" + (f"{ratio:>12.2f}" if ratio else ""))
        same = [c.tokens for c in results["run", decoding][2]] == \
            [c.tokens for c in results["export", decoding][2]]
        print(f"  the export's captions equal the run's token for token: {same}")


if __name__ == "__main__":
    main()
