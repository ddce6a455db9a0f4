"""What the checkpoint tool and the tools' command lines share: checks of a results folder's
place before the work, an interrupted replacement finished, and charts (matplotlib imported
only when one is drawn); tools/cli.py adds the command lines' own (one-line usage errors).
"""

import os
import sys
import tempfile

import errors
import files


def check_writable(folder, flag, path):
    """InputError naming `flag` and `path` unless a new file can be made in `folder`."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise errors.InputError(f"{flag} {path}: cannot write there ({e.strerror or e})") \
            from None


def finish_swap(path, tidy=False):
    """Finishes an interrupted replacement of the results folder `path` (files.recover_folder),
    said on stderr: every reader of results folders calls it first (`tidy`: a writer)."""
    if recovered := files.recover_folder(path, tidy):
        print(recovered, file=sys.stderr, flush=True)


def check_results_folder(path, flag, marker):
    """Checks, before any work, that a results folder can replace `path` whole (InputError).
    Returns the nearest existing folder at or above `path` (where the space is taken)."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise errors.InputError(f"{flag} {path} is a file; the results go in a folder")
    if os.path.isdir(path) and os.listdir(path) and not os.path.isfile(os.path.join(path, marker)):
        raise errors.InputError(f"{flag} {path} holds other files and no {marker}; give a new or "
                                f"empty folder")
    existing = os.path.dirname(path)
    while not os.path.isdir(existing):
        if os.path.exists(existing):
            raise errors.InputError(f"{flag} {path}: cannot write there ({existing} is a file)")
        existing = os.path.dirname(existing)
    check_writable(existing, flag, path)
    return existing


def pyplot():
    """matplotlib.pyplot, headless (the Agg backend), imported on this first use."""
    import matplotlib  # noqa: PLC0415 - a chart's import, kept out of every module's load

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt

