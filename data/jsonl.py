"""JSON Lines files (plain, `.bz2` or `.gz`) read one object per line, errors at file:line.

Every release file this project reads (XM3600 `captions.jsonl`, the COCO-35L and
CC3M-35L translation files) and every results file it writes is JSON Lines; one
reader keeps their error messages alike.

Three ways to read: `read_objects` parses line by line with `json` and names the
first bad line; `decode_lines` is the fast path for files that fit in memory,
decoding and type-checking every line in C with a msgspec decoder, and gives
up (returns None) at the first line that does not fit, so that the caller can
read the file again with `read_objects` and its own checks for the exact
message; `LineStream` is the fast path for files of any size (the 19 million
lines of COCO-35L's translations): one pass over the file in chunks, each line
decoded with a msgspec decoder, and a line that does not fit handed to the
caller's slow check, which names it or accepts it.

A key twice in one object (at any depth) is an error: JSON parsers keep the last
value without a word. `json` finds it with the `unique_keys` hook; msgspec cannot
(it keeps the last), so `decode_lines` counts the file's colons, which in valid
JSON are its keys plus the colons inside strings: when they equal the keys of
the decoded objects there is no repeated key, and otherwise (an unread field, a
colon in a caption) the lines are scanned with `json` and the hook.
"""

import bz2
import gzip
import json
import mmap
import os
import shutil
import subprocess

import msgspec
import numpy as np

import errors


class FormatError(errors.InputError):
    """A file does not have the layout its reader expects."""


class DuplicateKeyError(FormatError):
    """`unique_keys` found a key twice in one JSON object; `key` is the key. The readers add
    the file and line (the hook does not know them)."""

    def __init__(self, key):
        super().__init__(f"key {key!r} appears twice in one object")
        self.key = key


def unique_keys(pairs):
    """An `object_pairs_hook` for `json`: the object as a dict, or DuplicateKeyError."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return obj


def _open_binary(path):
    path = str(path)
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_objects(path, error=FormatError):
    """Yields (where, object) for each non-blank line; `where` is "path:line".

    Args:
        path: the file (compressed by its ending).
        error: the exception class raised for a line that is not a JSON object.

    Raises:
        error: a line is not UTF-8, not valid JSON or not an object; names the
            file and line.
    """
    with _open_binary(path) as f:
        for lineno, raw in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            obj = parse_line(raw, where, error)
            if obj is not None:
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
            try:
                return mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ,
                                 flags=mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0))
            except (OSError, ValueError, TypeError, AttributeError):
                pass  # empty, not mappable, or no POSIX mmap: read it
    with _open_binary(path) as f:
        return f.read()


def decode_lines(path, decoder, count_keys=None):
    """Decodes every non-blank line with `decoder`, or returns None if one does not decode.

    A line is blank as for `read_objects` when it is ASCII whitespace; one
    that is only other Unicode whitespace fails here, so the caller's slow
    path decides. Each line is decoded on its own (not the file as a
    sequence of values), so a line holding two objects, or an object spread
    over two lines, fails as it does with `json`. Lines are decoded where
    they lie in the memory-mapped file, never copied.

    Args:
        path: the file (compressed by its ending).
        decoder: a `msgspec.json.Decoder` of the type each line must have; it
            must accept no line that `json.loads` rejects (msgspec's JSON is
            the stricter: no NaN, no lone surrogates).
        count_keys: count_keys(objects) -> the number of keys (nested ones
            included) the decoded objects hold, for the fast check of repeated
            keys (module docstring); None: every line is scanned with `json`.

    Returns:
        `Lines` (the decoded objects, in file order), or None when a line is
        not UTF-8, not valid JSON or not of the decoder's type, or holds a key
        twice in one object, or when the path is not a regular file (a pipe
        could not be read a second time).
    """
    if not os.path.isfile(path):
        return None
    data = _whole_file(path)
    objects, linenos = [], []
    decode, find, size = decoder.decode, data.find, len(data)
    start = lineno = 0
    view = memoryview(data)
    try:
        while start < size:
            end = find(b"\n", start)
            if end < 0:
                end = size
            lineno += 1
            try:
                objects.append(decode(view[start:end]))
                linenos.append(lineno)
            except (msgspec.DecodeError, ValueError):  # UnicodeDecodeError is a ValueError
                if data[start:end].strip():
                    return None
            start = end + 1
        if count_keys is None or _count_colons(data) != count_keys(objects):
            if _has_repeated_key(data):
                return None
    finally:
        view.release()
        if isinstance(data, mmap.mmap):
            try:
                data.close()
            except BufferError:
                pass  # msgspec.Raw fields view it: unmapped once they are freed.
    return Lines(objects, linenos)


def _count_colons(data, chunk=1 << 22):
    """b":" in `data` (bytes or an mmap), counted by numpy a cache-sized chunk at a time (three
    times as fast as bytes.count, which an mmap does not even have)."""
    return sum(int(np.count_nonzero(np.frombuffer(data, np.uint8, min(chunk, len(data) - i), i)
                                    == ord(":")))
               for i in range(0, len(data), chunk))


def _has_repeated_key(data):
    """Whether a line of `data` (valid JSON Lines) holds a key twice in one object."""
    start, size = 0, len(data)
    while start < size:
        end = data.find(b"\n", start)
        end = size if end < 0 else end
        if end > start:
            try:
                json.loads(data[start:end], object_pairs_hook=unique_keys)
            except DuplicateKeyError:
                return True
            except ValueError:
                pass  # A blank line (the decoder took all others).
        start = end + 1
    return False


class LineStream:
    """The non-blank lines of a (compressed) JSON Lines file, decoded in one streaming pass.

    Iterating yields (line number, object); memory holds one chunk of the
    decompressed file, whatever its length. `position` and `size` (bytes of
    the file on disk, compressed or not) measure the progress. A `.bz2` file is
    decompressed by `lbzip2`, `pbzip2` or `bzip2` when one is installed (the
    first two on every core), in a process of its own, so that decompressing
    and decoding overlap; else by Python's bz2 module.

    Args:
        path: the file (compressed by its ending).
        decoder: a `msgspec.json.Decoder` of the type each line should have.
        fallback: fallback(where, line) -> object, for a line the decoder
            rejects: returns the object (a line msgspec is stricter about
            than `json`), None to skip it (a line of Unicode whitespace), or
            raises the caller's error naming `where` ("path:line").
        chunk_size: decompressed bytes read at a time.
        external: use an installed bzip2 program for `.bz2` files.
    """

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
        tool = None
        if self.path.endswith(".bz2") and self._external:
            tool = next(filter(None, map(shutil.which, ("lbzip2", "pbzip2", "bzip2"))), None)
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
        if self.path.endswith(".bz2"):
            stream = bz2.BZ2File(self._raw)
        elif self.path.endswith(".gz"):
            stream = gzip.GzipFile(fileobj=self._raw)
        else:
            stream = self._raw
        try:
            while chunk := stream.read(self._chunk_size):
                yield chunk
        except (OSError, EOFError) as e:
            raise FormatError(f"{self.path}: not a readable compressed file ({e})") from None

    def __iter__(self):
        decode, lineno, rest = self._decoder.decode, 0, b""
        with open(self.path, "rb") as self._raw:
            for chunk in self._chunks():
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    lineno += 1
                    try:
                        obj = decode(line)
                    except (msgspec.DecodeError, ValueError):
                        obj = self._fallback(f"{self.path}:{lineno}", line) \
                            if line.strip() else None
                    if obj is not None:
                        yield lineno, obj
            if rest.strip():
                lineno += 1
                try:
                    obj = decode(rest)
                except (msgspec.DecodeError, ValueError):
                    obj = self._fallback(f"{self.path}:{lineno}", rest)
                if obj is not None:
                    yield lineno, obj
        self.lines = lineno


def parse_line(line, where, error=FormatError):
    """A JSON object from one line's bytes (None if blank), or `error` as `read_objects` raises.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not UTF-8 ({e.reason} at byte {e.start})") from None
    if not text.strip():
        return None
    try:
        obj = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON ({json_problem(e)})") from None
    except DuplicateKeyError as e:
        raise error(f"{where}: {e} (a reader would keep only the last value)") from None
    if not isinstance(obj, dict):
        raise error(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def json_problem(error):
    """A json.JSONDecodeError as "<what>, column <n>" (its own message may end in "at")."""
    return f"{error.msg.removesuffix(' at')}, column {error.colno}"
