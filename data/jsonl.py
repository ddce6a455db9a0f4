"""JSON Lines files (plain, `.bz2` or `.gz`), one object a line, errors at file:line.

`loads` is the one parse with `json` (every reader of a JSON file goes through it): a key twice in
one object, or nesting deeper than Python's recursion limit (a file 100,000 brackets deep), is
an error naming the file like any syntax error. `read_objects` parses each line with it;
`decode_lines` (files that fit in memory) and `LineStream`
(any size) decode with msgspec and leave a line that does not fit to the caller's slow path.
A key twice in one object is an error (msgspec cannot see it: `decode_lines` compares colons
with decoded keys, and scans with `json` only when they differ).
"""

import bz2
import contextlib
import gzip
import json
import mmap
import os
import shutil
import subprocess
import sys

import msgspec
import numpy as np

import errors


class FormatError(errors.InputError):
    """A file does not have the layout its reader expects."""


class DuplicateKeyError(FormatError):
    """`unique_keys` found `key` twice in one object (the readers add the file and line)."""

    def __init__(self, key):
        super().__init__(f"key {key!r} appears twice in one object")
        self.key = key


def unique_keys(pairs):
    """An `object_pairs_hook` for `json`: the object as a dict, or DuplicateKeyError naming the
    first key that repeats an earlier one."""
    if len(obj := dict(pairs)) != len(pairs):
        keys = [key for key, _ in pairs]
        raise DuplicateKeyError(next(key for i, key in enumerate(keys) if key in keys[:i]))
    return obj


def loads(text, where, error=FormatError, one_line=False):
    """The JSON value of `text` (str or bytes) whose objects have unique keys, else `error` naming
    `where` (a file; with `one_line`, "file:line" of the one line `text` is)."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as e:
        at = where if one_line else f"{where}:{e.lineno}"
        problem = f"{e.msg.removesuffix(' at')}, column {e.colno}"  # Its msg may end in "at".
        raise error(f"{at}: not valid JSON ({problem})") from None
    except DuplicateKeyError as e:
        raise error(f"{where}: {e} (a reader would keep only the last value)") from None
    except RecursionError:  # Python's bound on nesting: the C parser recurses per level.
        raise error(f"{where}: not readable JSON (nested too deep: Python's reader stops at "
                    f"about {sys.getrecursionlimit()} levels)") from None


def _open_binary(path, raw=None):
    """`path` read in binary, decompressed if it ends in .bz2 or .gz (`raw`: the file, open)."""
    if opener := {".bz2": bz2.open, ".gz": gzip.open}.get(os.path.splitext(str(path))[1]):
        return opener(raw or str(path), "rb")
    return raw or open(path, "rb")


def read_objects(path, error=FormatError):
    """Yields ("path:line", object) for each non-blank line.
    Raises `error` naming the file and line for a line not UTF-8, not JSON or not an object."""
    with _open_binary(path) as f:
        for lineno, raw in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            if (obj := parse_line(raw, where, error)) is not None:
                yield where, obj


class Lines(list):
    """Objects decoded by `decode_lines`, with `linenos`, the line number of each."""

    def __init__(self, objects, linenos):
        super().__init__(objects)
        self.linenos = linenos


def _whole_file(path):
    """The file's bytes: memory-mapped (read ahead) when it is a plain file, else read."""
    if not str(path).endswith((".bz2", ".gz")):
        with open(path, "rb") as f:
            # Empty, not mappable, or no POSIX mmap: read.
            with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
                return mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ,
                                 flags=mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0))
    with _open_binary(path) as f:
        return f.read()


def decode_lines(path, decoder, count_keys=None):
    """Decodes every non-blank line of a regular file (its readers check that, naming it) with
    `decoder`: `Lines`, or None if any line does not fit. None also for a line of non-ASCII
    whitespace or a repeated key (the slow path must read it again). Each line is decoded on its
    own, in place in the memory-mapped file. `decoder` must accept no line `json.loads` rejects;
    `count_keys(objects)` gives the decoded keys for the repeated-key check (None: scan)."""
    data = _whole_file(path)
    objects, linenos = [], []
    decode, view = decoder.decode, memoryview(data)
    try:
        for lineno, (start, end) in enumerate(_line_spans(data), start=1):
            try:
                objects.append(decode(view[start:end]))
                linenos.append(lineno)
            except (msgspec.DecodeError, ValueError, RecursionError):  # Unicode errors: ValueError
                if data[start:end].strip():
                    return None
        if count_keys is None or _count_colons(data) != count_keys(objects):
            if _has_repeated_key(data):
                return None
    finally:
        view.release()
        if isinstance(data, mmap.mmap):
            # msgspec.Raw fields may view it: then unmapped once they are freed.
            with contextlib.suppress(BufferError):
                data.close()
    return Lines(objects, linenos)


def _count_colons(data, chunk=1 << 22):
    """b":" in `data` (bytes or mmap), counted by numpy a chunk at a time (3x bytes.count)."""
    return sum(int(np.count_nonzero(np.frombuffer(data, np.uint8, min(chunk, len(data) - i), i)
                                    == ord(":")))
               for i in range(0, len(data), chunk))


def _has_repeated_key(data):
    """Whether a line of `data` (valid JSON Lines) holds a key twice in one object."""
    for start, end in _line_spans(data):
        try:
            json.loads(data[start:end], object_pairs_hook=unique_keys)
        except DuplicateKeyError:
            return True
        except (ValueError, RecursionError):
            pass  # A blank line (the decoder took all others), or nested too deep (said later).
    return False


def _line_spans(data):
    """(start, end) of each line of `data` (bytes or mmap), its newline left out."""
    start, size = 0, len(data)
    while start < size:
        end = data.find(b"\n", start)
        end = size if end < 0 else end
        yield start, end
        start = end + 1


class LineStream:
    """The non-blank lines of a (compressed) JSON Lines file, decoded in one streaming pass.
    Yields (line number, object), one chunk in memory; `position` / `size` (bytes on disk) measure
    progress. `.bz2` goes through `lbzip2`, `pbzip2` or `bzip2` in its own process when installed
    (decompression overlaps decoding). `fallback(where, line)` handles a line the decoder rejects:
    returns its object, None to skip it, or raises naming `where`."""

    def __init__(self, path, decoder, fallback, chunk_size=1 << 22, external=True):
        self.path = str(path)
        self._decoder, self._fallback, self._chunk_size = decoder, fallback, chunk_size
        self._external = external
        self.size = os.path.getsize(self.path)
        self.lines = 0  # Lines read, once the iteration is over.
        self._raw = None

    @property
    def position(self):
        """Bytes of the file on disk read so far."""
        if self._raw is None:
            return 0
        if self._raw.closed:
            return self.size
        return os.lseek(self._raw.fileno(), 0, os.SEEK_CUR)  # Shared with a decompressor.

    def _chunks(self):
        """The decompressed file, chunk by chunk."""
        tool = self.path.endswith(".bz2") and self._external and next(
            filter(None, map(shutil.which, ("lbzip2", "pbzip2", "bzip2"))), None)
        if tool:
            with subprocess.Popen([tool, "-dc"], stdin=self._raw, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) as proc:
                while chunk := proc.stdout.read(self._chunk_size):
                    yield chunk
                problem = proc.stderr.read().decode("utf-8", "replace").strip()
            if proc.returncode:
                raise FormatError(f"{self.path}: not a readable .bz2 file "
                                  f"({problem.splitlines()[-1] if problem else proc.returncode})")
            return
        stream = _open_binary(self.path, self._raw)
        with errors.reraised(FormatError, (OSError, EOFError),
                             f"{self.path}: not a readable compressed file: "):
            while chunk := stream.read(self._chunk_size):
                yield chunk

    def _lines(self):
        """The file's lines, a last one without a newline only if it is not blank."""
        rest = b""
        with open(self.path, "rb") as self._raw:
            for chunk in self._chunks():
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                yield from lines
            if rest.strip():
                yield rest

    def __iter__(self):
        decode, lineno = self._decoder.decode, 0
        for lineno, line in enumerate(self._lines(), start=1):
            try:
                obj = decode(line)
            except (msgspec.DecodeError, ValueError, RecursionError):
                obj = self._fallback(f"{self.path}:{lineno}", line) if line.strip() else None
            if obj is not None:
                yield lineno, obj
        self.lines = lineno


def parse_line(line, where, error=FormatError):
    """A JSON object from one line's bytes (None if blank), or `error` as `read_objects` raises."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not UTF-8 ({e.reason} at byte {e.start})") from None
    if not text.strip():
        return None
    if not isinstance(obj := loads(text, where, error, one_line=True), dict):
        raise error(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj
