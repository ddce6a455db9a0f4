"""What the command lines share: one `error:` line, checked numbers, checked output places.

argparse reports an unknown or stray argument with its whole usage (twenty lines for the
meta-evaluation) before the error; `ArgumentParser` prints the one line `error: <message>`
that every command line of the project prints, and exits with status 2. `count` and `number`
are argparse types that check a value's range (and that a float is finite: NaN passes every
comparison) while the arguments are parsed, before any work; `check_output_file` checks an
output file's place before the work that fills it.
"""

import argparse
import math
import os
import tempfile

import errors

# Bootstrap resamples at most: 10^5 resamples put the Monte Carlo error of a 95% interval's
# ends far below the interval's width, and a typo of 10^11 would otherwise die allocating
# terabytes after the inputs were read.
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
    """Checks, before any work, that the file `path` can be written (InputError naming `flag`).

    The folder must exist and take a new file (one is created and removed); `path` itself
    must not be a folder. An existing file is left as it is (the tool replaces it later).
    """
    if os.path.isdir(path):
        raise errors.InputError(f"{flag} {path} is a folder; give a file name")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise errors.InputError(f"{flag} {path}: no folder {folder}")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise errors.InputError(f"{flag} {path}: cannot write there ({e.strerror or e})") \
            from None


def prepare_out(out, flag="--out"):
    """Creates the folder `out` if needed and checks that a file can be written in it.

    Called before the work, so that a bad --out (a file, /proc/x, a read-only place) is one
    error line at once rather than a traceback after the work.

    Raises:
        InputError: `out` is a file, or cannot be created or written (the cause named).
    """
    if os.path.exists(out) and not os.path.isdir(out):
        raise errors.InputError(f"{flag} {out} is a file; the report goes in a folder")
    try:
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise errors.InputError(f"{flag} {out}: cannot write there ({e.strerror or e})") \
            from None
    return out


def not_written(out, error, printed_json=False):
    """The InputError of a report that could not be written after the work (a full disk).

    The command lines print their results before writing the report, so that it names
    where they are: nothing is lost.
    """
    return errors.InputError(f"--out {out}: cannot write the report ({error.strerror or error})"
                             f"; the results are printed above{' (JSON)' if printed_json else ''}")
