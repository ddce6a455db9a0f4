"""A real file system with no room left, for the tests of what a full disk leaves behind."""

import contextlib
import errno
import os

from tests import tiny


@contextlib.contextmanager
def full_disk(folder, keep=None):
    """Yields the new folder `folder` as a small tmpfs filled up, once {file name: text} of
    `keep` (a previous output) is written in it: a new file can be created, no byte written."""
    with tiny.small_tmpfs(folder, "256k"):
        for name, text in (keep or {}).items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write(text)
        fill(folder)
        yield folder


def fill(folder):
    """Takes every byte left on the file system of `folder` (a file `.filler` there)."""
    with open(os.path.join(folder, ".filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise


def listing(folder):
    """{file name: size} of the files in `folder` but the filler."""
    return {name: os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)
            if name != ".filler"}
