r"""Captions images with a trained captioner, in any of its languages.

    python -m tools.captioning IMAGE_OR_FOLDER_OR_PATTERN... (--workdir RUN [--step N|best] | \
        --exported FILE.npz) [--langs en,es,hi,zh|all] [--decode greedy|beam|sample] \
        [--beam_size 4] [--alpha 0.6] [--temperature 1.0] [--top_k 0] [--seed 0] \
        [--batch_size 16] [--max_len N] [--format table|jsonl] [--out FILE] \
        [--on_error stop|skip]

Images: files (any format PIL reads), folders (their image files, not recursive) and glob
patterns (quoted; `**` recursive). The model: a run folder (its latest checkpoint, `--step
best` for checkpoints_best/, or a step) or a file written by `python -m tools.captioning.export`.
Output, image by image as batches finish: a readable table (default) or JSONL lines
{"image", "lang", "caption", "log_prob"}, on stdout or into `--out`; a progress bar on
stderr when it is a terminal. An unreadable image stops the run (`--on_error stop`, the
default: before any decoding when a named file is missing) or is named on stderr and skipped.

Bad input is one `error: ...` line and exit status 2; `--out` is opened only once the
arguments, the model and the images' names have been checked, and holds every caption
finished before a later error.
"""

import argparse
import dataclasses
import json
import os
import sys
import time

from tqdm import tqdm

from errors import InputError
from tools.captioning import decoding as decoding_lib
from tools.captioning import inputs
from tools.captioning.arguments import ArgumentParser
from tools.captioning.predict import ON_ERROR, Captioner


def parser():
    p = ArgumentParser(
        prog="python -m tools.captioning", description=__doc__.split("\n\n")[0].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    p.add_argument("images", nargs="+", help="image files, folders or glob patterns")
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--workdir", help="a run's folder (config.json, checkpoints/)")
    model.add_argument("--exported", help="a file written by python -m tools.captioning.export")
    p.add_argument("--step", default=None,
                   help="with --workdir: a checkpoint step, or 'best' (default: the latest)")
    p.add_argument("--langs", default="en", help="comma-separated codes, or 'all' (default en)")
    p.add_argument("--decode", default="greedy", choices=decoding_lib.METHODS,
                   help="greedy (default), beam search (T5X) or sampling")
    p.add_argument("--beam_size", type=int, default=None, help="beams (default 4)")
    p.add_argument("--alpha", type=float, default=None,
                   help="beam length-penalty exponent, T5X's (default 0.6)")
    p.add_argument("--temperature", type=float, default=None,
                   help="sampling temperature (default 1.0)")
    p.add_argument("--top_k", type=int, default=None,
                   help="sample among the k most likely tokens (default 0: all)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default 0)")
    p.add_argument("--batch_size", type=int, default=16,
                   help="(image, language) rows decoded together (default 16)")
    p.add_argument("--max_len", type=int, default=None,
                   help="with --workdir: decoding length (default: the run's max_target_len)")
    p.add_argument("--format", default="table", choices=("table", "jsonl"),
                   help="per image: its path, then language, log-probability, caption "
                        "(default); or a JSON line per caption")
    p.add_argument("--out", default=None, help="write the captions here instead of stdout")
    p.add_argument("--on_error", default="stop", choices=ON_ERROR,
                   help="an unreadable image: stop (default) or skip it")
    return p


SETTINGS = ("beam_size", "alpha", "temperature", "top_k", "seed")


def load_captioner(args):
    """The captioner the arguments name (InputError for the combinations that make none)."""
    if args.exported:
        for flag in ("step", "max_len"):
            if getattr(args, flag) is not None:
                raise InputError(f"--{flag} is a setting of --workdir; an exported model has "
                                 f"its own")
        return Captioner.from_exported(args.exported)
    return Captioner.from_run(args.workdir, args.step, max_len=args.max_len)


def decoding_of(args, captioner):
    """The Decoding of --decode and the settings given; the others the model's defaults."""
    given = {k: getattr(args, k) for k in SETTINGS if getattr(args, k) is not None}
    return captioner.check_decoding(
        dataclasses.replace(captioner.default_decoding(args.decode), **given))


def table_block(image, captions):
    """An image's lines of the table: its path, then language, log-probability, caption."""
    width = max(len(c.lang) for c in captions)
    return image + "\n" + "".join(f"  {c.lang:<{width}}  {c.log_prob:7.2f}  {c.text}\n"
                                  for c in captions)


class Writer:
    """Writes captions image by image as they come, flushed, in the chosen format."""

    def __init__(self, stream, fmt, num_langs):
        self.stream, self.fmt, self.num_langs = stream, fmt, num_langs
        self._pending = []

    def add(self, caption):
        """Takes one caption; returns True when it completed its image's block."""
        self._pending.append(caption)
        if len(self._pending) < self.num_langs:
            return False
        if self.fmt == "jsonl":
            text = "".join(json.dumps(c.record(), ensure_ascii=False) + "\n"
                           for c in self._pending)
        else:
            text = table_block(self._pending[0].image, self._pending)
        if self.stream is sys.stdout:
            tqdm.write(text, file=self.stream, end="")  # Above the progress bar.
        else:
            self.stream.write(text)
        self.stream.flush()
        self._pending = []
        return True


def caption_files(args):
    """Captions the images of the arguments, writing them as they come.

    Returns:
        (images captioned, names of those skipped, captioner, decoding, languages).
    """
    files = inputs.expand(args.images)
    if args.on_error == "stop":
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            raise InputError(f"image file not found: {missing[0]}"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    if args.batch_size < 1:
        raise InputError(f"--batch_size must be >= 1, got {args.batch_size}")
    captioner = load_captioner(args)
    langs = captioner.check_langs(args.langs)
    decoding = decoding_of(args, captioner)
    stream = sys.stdout
    if args.out:
        try:
            stream = open(args.out, "w", encoding="utf-8")  # noqa: SIM115  closed below
        except OSError as e:
            raise InputError(f"--out {args.out}: {e.strerror or e}") from None
    bar = tqdm(total=len(files), unit="image", file=sys.stderr, disable=None,
               dynamic_ncols=True)
    skipped = []

    def skip(name, message):
        skipped.append(name)
        bar.update(1)
        tqdm.write(f"skipped: {message}", file=sys.stderr)

    writer = Writer(stream, args.format, len(langs))
    done = 0
    try:
        for caption in captioner.iter_captions(files, langs, decoding,
                                               batch_size=args.batch_size,
                                               on_error=args.on_error, skipped=skip):
            if writer.add(caption):
                done += 1
                bar.update(1)
    finally:
        bar.close()
        if stream is not sys.stdout:
            stream.close()
    return done, skipped, captioner, decoding, langs


def main(argv=None):
    """The command line; returns 0, or exits with status 2 and `error: ...`."""
    args = parser().parse_args(argv)
    start = time.time()
    try:
        done, skipped, captioner, decoding, langs = caption_files(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    skipped_note = f", skipped {len(skipped)}" if skipped else ""
    print(f"captioned {done} image(s) in {len(langs)} language(s){skipped_note} with "
          f"{decoding.describe()}, {captioner.source}, in {time.time() - start:.1f} s"
          + (f"; captions in {args.out}" if args.out else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    main()
