"""The output folder of an analysis command line, checked before any work fills it."""

import os
import tempfile

from errors import InputError


def prepare_out(out, flag="--out"):
    """Creates the folder `out` if needed and checks that a file can be written in it.

    Called before the analysis runs, so that a bad --out (a file, /proc/x, a read-only
    place) is one error line at once rather than a traceback after the work.

    Raises:
        InputError: `out` is a file, or cannot be created or written (the cause named).
    """
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"{flag} {out} is a file; the report goes in a folder")
    try:
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise InputError(f"{flag} {out}: cannot write there ({e.strerror or e})") from None
    return out


def not_written(out, error, printed_json=False):
    """The InputError of a report that could not be written after the work (a full disk).

    The command lines print their results before writing the report, so that it names
    where they are: nothing is lost.
    """
    return InputError(f"--out {out}: cannot write the report ({error.strerror or error}); "
                      f"the results are printed above{' (JSON)' if printed_json else ''}")
