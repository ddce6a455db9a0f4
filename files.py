"""The one way the project writes an output file: whole, or not at all.

`replacing(path)` writes a temporary file beside `path` and renames it onto `path` when the
block ends without error: a reader sees the old file or the new one; on an error (full disk,
Ctrl-C) `path` is left as it was. `replacing_folder(path)` does the same for a folder.
`kind` and `not_a_file` say what an input path is when it is there but no file.
"""

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile

import crash_points


@contextlib.contextmanager
def replacing(path, mode="w", newline=None, permissions=None):
    """A file object whose contents replace `path` when the block ends without an error.
    `mode` "w" (UTF-8) or "wb"; `permissions` default as `open` makes them (0o666 less the
    umask)."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        text = {} if "b" in mode else {"encoding": "utf-8", "newline": newline}
        with os.fdopen(fd, mode, **text) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # On disk before the rename, or a power cut may leave it empty.
        # mkstemp makes it 0600; a plain open would not.
        os.chmod(tmp, 0o666 & ~_umask() if permissions is None else permissions)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def write_text(path, text, permissions=None):
    """Replaces `path` with `text` (UTF-8), whole or not at all."""
    with replacing(path, permissions=permissions) as f:
        f.write(text)


def write_bytes(path, data):
    """Replaces `path` with `data`, whole or not at all."""
    with replacing(path, "wb") as f:
        f.write(data)


def write_json(path, obj, indent=1):
    """Replaces `path` with `obj` as JSON (UTF-8, a final newline), whole or not at all."""
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def replacing_folder(path):
    """A temporary folder beside `path` (yielded, to write in) that replaces `path` when the block
    ends without error (the old one moved aside, then deleted); on error `path` is left as it was.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    recover_folder(path)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        old = None
        if os.path.lexists(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".old",
                                   dir=parent)
            os.rmdir(old)
            os.replace(path, old)
            crash_points.passed(f"{os.path.basename(path)} moved aside")
        os.replace(tmp, path)
        crash_points.passed(f"{os.path.basename(path)} renamed in")
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def recover_folder(path, tidy=True):
    """Finishes or undoes an interrupted `replacing_folder(path)`; returns a line saying what
    was renamed in, or "".
    The folder at `path` is moved aside (".old") only once the new one (".tmp") is whole: with
    `path` gone and an old one aside, the new one is renamed in, else the old one. Every other
    folder they left beside `path` is deleted if `tidy` (a writer; a reader leaves them: they
    may be another writer's, in progress)."""
    parent, name = os.path.split(os.path.abspath(os.fspath(path)))
    left = {"old": [], "tmp": []}
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.scandir(parent):
            kind = re.fullmatch(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.(old|tmp)", entry.name)
            if kind and entry.is_dir(follow_symlinks=False):
                left[kind[1]].append(entry.path)
    done = ""
    if left["old"] and not os.path.lexists(path):
        kind = "tmp" if left["tmp"] else "old"
        chosen = max(left[kind], key=os.path.getmtime)
        left[kind].remove(chosen)
        os.replace(chosen, os.path.join(parent, name))
        done = (f"{os.path.join(parent, name)}: an interrupted replacement finished: "
                + ("the new folder, written whole, renamed in" if kind == "tmp" else
                   "the previous folder restored"))
    for leftover in left["old"] + left["tmp"] if tidy else ():
        shutil.rmtree(leftover, ignore_errors=True)
    return done


def kind(path):
    """What is at `path`: "a file", "a folder", "a FIFO (named pipe)" (reading it would wait
    forever), "a socket", "a device", or None (nothing)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    kinds = ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a device")


def not_a_file(path, what):
    """"<what> <path> is a folder, not a file" (`kind`) for a `path` that is there but no
    regular file, else None."""
    found = kind(path)
    return None if found in (None, "a file") else f"{what} {path} is {found}, not a file"


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
