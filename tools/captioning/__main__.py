r"""Captions images with a trained captioner, in any of its languages.

    python -m tools.captioning IMAGE_OR_FOLDER_OR_PATTERN... (--workdir RUN [--step N|best] | \
        --exported FILE.npz) [--langs en,es,hi,zh|all] [--decode greedy|beam|sample] \
        [--beam_size 4] [--alpha 0.6] [--temperature 1.0] [--top_k 0] [--seed 0] \
        [--batch_size 16] [--max_len N] [--format table|jsonl] [--out FILE] \
        [--on_error stop|skip] [--compilation_cache DIR|none]

Images: files (any format PIL reads), folders (their image files, not recursive) and glob
patterns (quoted; `**` recursive). The model: a run folder (its latest checkpoint, `--step
best` for checkpoints_best/, or a step) or a file written by `python -m tools.captioning.export`.
Output, image by image as batches finish: a readable table (default) or JSONL lines of a
predictions file {"image/key" (the file name's stem), "lang", "caption", "image", "log_prob"}
that `python -m tools.cider --predictions` scores as it is; on stdout, or into `--out`
(written whole when the run ends); a progress bar on stderr when it is a terminal. An
unreadable image stops the run (`--on_error stop`, the default: before any decoding when a
named file is missing) or is named on stderr and skipped. Compiled programs are kept in JAX's
persistent compilation cache, as the checkpoint tool keeps them: a second run starts faster.

Bad input is one `error: ...` line and exit status 2; `--out` is written only once the
arguments, the model and the images' names have been checked, and then holds every caption
finished before an unreadable image stopped the run (the error line says so).
"""

import argparse
import dataclasses
import os
import sys
import time

from tqdm import tqdm

import errors
import files
from errors import InputError
from model import decode
from tools.captioning import arguments, inputs
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
    p.add_argument("--langs", default="en",
                   help="comma-separated codes, or 'all' (default en); a code given twice "
                        "counts once")
    p.add_argument("--decode", default="greedy", choices=decode.METHODS,
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
                   help="with --workdir: decoding length (default: the run's "
                        "data.max_target_len; at most the longest it trained or evaluated at)")
    p.add_argument("--format", default="table", choices=("table", "jsonl"),
                   help="per image: its path, then language, log-probability, caption "
                        "(default); or a JSON line per caption")
    p.add_argument("--out", default=None, help="write the captions here instead of stdout")
    p.add_argument("--on_error", default="stop", choices=ON_ERROR,
                   help="an unreadable image: stop (default) or skip it")
    p.add_argument("--compilation_cache", default=None,
                   help="JAX's persistent compilation cache (default: "
                        "$JAX_COMPILATION_CACHE_DIR, else <workdir>/compilation_cache, else "
                        "~/.cache/xm3600/jax); 'none' turns it off")
    return p


def load_captioner(args):
    """The captioner the arguments name (InputError for the combinations that make none)."""
    if args.exported:
        for flag in ("step", "max_len"):
            if getattr(args, flag) is not None:
                raise InputError(f"--{flag} is a setting of --workdir; an exported model has "
                                 f"its own")
        return Captioner.from_exported(args.exported, compilation_cache=args.compilation_cache)
    return Captioner.from_run(args.workdir, args.step, max_len=args.max_len,
                              compilation_cache=args.compilation_cache)


def decoding_of(args, captioner=None):
    """The Decoding of --decode and the settings given, the others the model's defaults.

    Without `captioner`, the settings given are checked against Decoding's defaults (before
    the model is read); an export's own settings are checked with it.
    """
    given = {k: getattr(args, k) for k in decode.SETTINGS}
    if captioner is None:
        return decode.Decoding.create(args.decode, given, "--{}")
    settings = dataclasses.asdict(captioner.default_decoding(args.decode))
    del settings["method"]
    settings.update({k: v for k, v in given.items() if v is not None})
    decoding = decode.Decoding.create(args.decode, settings, "--{}")
    try:
        return captioner.check_decoding(decoding)
    except decode.DecodingError as e:
        raise decode.DecodingError(f"--{e.setting}", e.problem) from None


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
            text = "".join(c.line() for c in self._pending)
        else:
            text = table_block(self._pending[0].image, self._pending)
        if self.stream is sys.stdout:
            tqdm.write(text, file=self.stream, end="")  # Above the progress bar.
        else:
            self.stream.write(text)
        self.stream.flush()
        self._pending = []
        return True


def _prepare(args):
    """(image files, captioner, languages, decoding) of the arguments, all checked."""
    paths = inputs.expand(args.images)
    if args.on_error == "stop":
        missing = [f for f in paths if not os.path.isfile(f)]
        if missing:
            raise InputError((files.not_a_file(missing[0], "image") or
                              f"image file not found: {missing[0]}")
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    if args.batch_size < 1:
        raise InputError(f"--batch_size must be >= 1, got {args.batch_size}")
    if args.max_len is not None and args.max_len < 1:
        raise InputError(f"--max_len must be >= 1, got {args.max_len}")
    decoding_of(args)
    captioner = load_captioner(args)
    langs, decoding = captioner.check_langs(args.langs), decoding_of(args, captioner)
    try:
        captioner.check_size(decoding, args.batch_size, len(paths) * len(langs))
    except decode.DecodingError as e:
        raise decode.DecodingError(f"--{e.setting}", e.problem) from None
    return paths, captioner, langs, decoding


def _write_captions(args, stream, paths, captioner, langs, decoding):
    """Captions `paths` into `stream` as they come.

    Returns:
        (images captioned, names of those skipped, the InputError of the image that
        stopped the run or None).
    """
    bar = tqdm(total=len(paths), unit="image", file=sys.stderr, disable=None,
               dynamic_ncols=True)
    skipped = []

    def skip(name, message):
        skipped.append(name)
        bar.update(1)
        tqdm.write(f"skipped: {message}", file=sys.stderr)

    writer = Writer(stream, args.format, len(langs))
    done = 0
    try:
        for caption in captioner.iter_captions(paths, langs, decoding,
                                               batch_size=args.batch_size,
                                               on_error=args.on_error, skipped=skip):
            if writer.add(caption):
                done += 1
                bar.update(1)
    except InputError as e:  # An unreadable image, with --on_error stop.
        return done, skipped, e
    finally:
        bar.close()
    return done, skipped, None


def caption_files(args):
    """Captions the images of the arguments, writing them as they come (or into --out, whole).

    Returns:
        (images captioned, names of those skipped, captioner, decoding, languages).
    """
    paths, captioner, langs, decoding = _prepare(args)
    if not args.out:
        done, skipped, stopped = _write_captions(args, sys.stdout, paths, captioner, langs,
                                                 decoding)
    else:
        try:  # The file appears complete (the captions before an unreadable image) or not.
            with files.replacing(args.out) as stream:
                done, skipped, stopped = _write_captions(args, stream, paths, captioner,
                                                         langs, decoding)
        except OSError as e:
            raise InputError(f"--out {args.out}: {e.strerror or e}") from None
    if stopped:
        kept = f"; the captions of the {done} image(s) before it are in {args.out}" \
            if args.out and done else ""
        raise InputError(f"{stopped}{kept}")
    return done, skipped, captioner, decoding, langs


def main(argv=None, own_process=False):
    """The command line; returns 0 (bad input raises an `errors.Error`: see `errors.run_main`).
    `own_process`: the process is this command's (see `arguments.finished`)."""
    args = parser().parse_args(argv)
    start = time.time()
    done, skipped, captioner, decoding, langs = caption_files(args)
    arguments.finished(own_process)
    skipped_note = f", skipped {len(skipped)}" if skipped else ""
    print(f"captioned {done} image(s) in {len(langs)} language(s){skipped_note} with "
          f"{decoding.describe()}, {captioner.source}, in {time.time() - start:.1f} s"
          + (f"; captions in {args.out}" if args.out else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    errors.run_main(main, None, True)
