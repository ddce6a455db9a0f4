"""What the command lines share: argparse types that check ranges, checks of an output's place
before the work, and charts (matplotlib imported only when one is drawn).
"""

import argparse
import math
import os
import sys
import tempfile

import errors
import files
from data.releases import xm3600 as xm3600_release

# Bootstrap resamples at most: 10^5 put the Monte Carlo error of a 95% interval's ends far
# below its width; a typo of 10^11 would die allocating terabytes after the inputs were read.
MAX_SAMPLES = 100_000


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one `error:` line and exit status 2."""

    def error(self, message):
        errors.fail(f"{message} (see {self.prog} --help)")


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


def read_references(path, field="caption"):
    """`xm3600.read_references` for a command line: a missing file is an InputError too."""
    try:
        return xm3600_release.read_references(path, field)
    except FileNotFoundError as e:
        raise errors.InputError(str(e)) from None


def check_output_file(path, flag):
    """Checks, before any work, that the file `path` can be written (InputError naming `flag`)."""
    if os.path.isdir(path):
        raise errors.InputError(f"{flag} {path} is a folder; give a file name")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise errors.InputError(f"{flag} {path}: no folder {folder}")
    _check_writable(folder, flag, path)


def _check_writable(folder, flag, path, create=False):
    """InputError naming `flag` and `path` unless a new file can be made in `folder`."""
    try:
        if create:
            os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise errors.InputError(f"{flag} {path}: cannot write there ({e.strerror or e})") \
            from None


def prepare_out(out, flag="--out"):
    """Creates the folder `out` if needed and checks that a file can be written in it."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise errors.InputError(f"{flag} {out} is a file; the report goes in a folder")
    _check_writable(out, flag, out, create=True)
    return out


def not_written(out, error, printed_json=False):
    """The InputError of a report that could not be written after the work (a full disk)."""
    return errors.InputError(f"--out {out}: cannot write the report ({error.strerror or error})"
                             f"; the results are printed above{' (JSON)' if printed_json else ''}")


def finish_swap(path, tidy=False):
    """Finishes an interrupted replacement of the results folder `path` (files.recover_folder),
    said on stderr: every reader of results folders calls it first (`tidy`: a writer)."""
    recovered = files.recover_folder(path, tidy)
    if recovered:
        print(recovered, file=sys.stderr, flush=True)


def check_results_folder(path, flag, marker=None):
    """Checks, before any work, that a results folder can replace `path` whole (InputError).
    Returns the nearest existing folder at or above `path` (where the space is taken)."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise errors.InputError(f"{flag} {path} is a file; the results go in a folder")
    if os.path.isdir(path) and os.listdir(path) and (
            marker is None or not os.path.isfile(os.path.join(path, marker))):
        what = f"and no {marker}" if marker else "(the results replace the folder whole)"
        raise errors.InputError(f"{flag} {path} holds other files {what}; give a new or empty "
                                f"folder")
    existing = os.path.dirname(path)
    while not os.path.isdir(existing):
        if os.path.exists(existing):
            raise errors.InputError(f"{flag} {path}: cannot write there ({existing} is a file)")
        existing = os.path.dirname(existing)
    _check_writable(existing, flag, path)
    return existing


def free_bytes(folder):
    """Bytes an unprivileged writer may still write on the file system of `folder`."""
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize


def pyplot():
    """matplotlib.pyplot, headless (the Agg backend), imported on this first use."""
    import matplotlib  # noqa: PLC0415 - a chart's import, kept out of every module's load

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def save_figure(fig, path, dpi):
    """Writes `fig` to the PNG file `path`, whole or not at all, and closes the figure."""
    try:
        with files.replacing(path, "wb") as f:
            fig.savefig(f, format="png", dpi=dpi)
    finally:
        pyplot().close(fig)
