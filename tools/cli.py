"""What the tools' command lines share beyond `evaluation.cli`: a parser whose usage errors are
one `error:` line, argparse types that check ranges, the XM3600 references read, an output file
or folder checked before the work, and charts written whole.
"""

import argparse
import math
import os

import errors
import files
from data.releases import xm3600 as xm3600_release
from evaluation import cli

# Bootstrap resamples at most: 10^5 put the Monte Carlo error of a 95% interval's ends far
# below its width; a typo of 10^11 would die allocating terabytes after the inputs were read.
MAX_SAMPLES = 100_000


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one `error:` line and exit status 2."""

    def error(self, message):
        errors.fail(f"{message} (see {self.prog} --help)")


def read_references(path, field="caption"):
    """`xm3600.read_references` for a command line: a missing file is an InputError too."""
    with errors.reraised(errors.InputError, FileNotFoundError):
        return xm3600_release.read_references(path, field)


def count(low=0, high=None):
    """An argparse type: an integer in [low, high] (high None: no bound)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"in {low}..{high}"
            raise argparse.ArgumentTypeError(f"expected an integer {bound}, got {value}")
        return value
    return parse


def counts(low=0, high=None):
    """An argparse type: comma-separated integers, each as `count(low, high)` takes it."""
    one = count(low, high)
    return lambda text: [one(part) for part in text.split(",")]


def number(low, high, *, open_interval=False):
    """An argparse type: a finite float in [low, high], or (low, high) with open_interval."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        inside = low < value < high if open_interval else low <= value <= high
        if not math.isfinite(value) or not inside:
            bounds = f"({low}, {high})" if open_interval else f"[{low}, {high}]"
            raise argparse.ArgumentTypeError(f"expected a number in {bounds}, got {text}")
        return value
    return parse


def check_output_file(path, flag):
    """Checks, before any work, that the file `path` can be written (InputError naming `flag`)."""
    if os.path.isdir(path):
        raise errors.InputError(f"{flag} {path} is a folder; give a file name")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise errors.InputError(f"{flag} {path}: no folder {folder}")
    cli.check_writable(folder, flag, path)


def prepare_out(out, flag="--out"):
    """Creates the folder `out` if needed and checks that a file can be written in it."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise errors.InputError(f"{flag} {out} is a file; the report goes in a folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise errors.InputError(f"{flag} {out}: cannot write there ({e.strerror or e})") from None
    cli.check_writable(out, flag, out)
    return out


def not_written(out, error, printed_json=False):
    """The InputError of a report that could not be written after the work (a full disk)."""
    return errors.InputError(f"--out {out}: cannot write the report ({error.strerror or error})"
                             f"; the results are printed above{' (JSON)' if printed_json else ''}")


def save_figure(fig, path, dpi):
    """Writes `fig` to the PNG file `path`, whole or not at all, and closes the figure."""
    try:
        with files.replacing(path, "wb") as f:
            fig.savefig(f, format="png", dpi=dpi)
    finally:
        cli.pyplot().close(fig)
