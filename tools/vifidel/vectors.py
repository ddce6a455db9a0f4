"""Word vectors for VIFIDEL: word2vec text / binary and fastText `.vec` files, read once.

Formats (`fmt`):

- "text": word2vec's text format, which fastText's `.vec` files share: a header line
  "<words> <dim>", then one line per word, "word v1 ... v_dim", separated by spaces (fastText
  ends each line with one). A file without the header (GloVe's layout) is read too: its first
  line then holds a word and its vector, and sets the dimension.
- "binary": word2vec's binary format: the same header, then per word its UTF-8 bytes, a space
  and `dim` little-endian float32 values, optionally followed by a newline.
- "auto" (default): binary for a `.bin` file, text otherwise.

Keys. Each word is normalized as captions are (evaluation/cider/text.py, in the file's language:
NFKC, lowercase, punctuation to spaces, ja/th/zh characters split apart) and its key is the
resulting tokens joined by one space ("New_York" -> "new york", "红色" -> "红 色"). When two
words share a key the first in the file is kept (word2vec and fastText files are sorted by
frequency). Words with no token (punctuation) or a zero vector are dropped. Rows are scaled to
unit length: VIFIDEL compares directions, as the authors' scorer does.

Cache. Parsing a 2M-word text file takes minutes, so the first load writes the keys and the unit
matrix under the cache folder ($VIFIDEL_CACHE_DIR, else ~/.cache/xm3600/vifidel), named by a
digest of the file's path, size and modification time and the reading settings; later loads
memory-map the matrix. Within a process `load_vectors` returns the object it loaded before.
"""

import dataclasses
import hashlib
import json
import mmap
import os
import threading
import warnings

import numpy as np
from absl import logging

import files
from data import languages
from errors import InputError
from evaluation.cider import text

FORMATS = ("auto", "text", "binary")
CACHE_ENV = "VIFIDEL_CACHE_DIR"
LANG_PLACEHOLDER = "{lang}"
_CACHE_VERSION = 2  # 2: keys normalized with script symbols as tokens (text.py)
_CHUNK_LINES = 20000
# A word2vec binary word longer than this means the header's dimension is wrong.
_MAX_WORD_BYTES = 2000
_LOADED = {}
_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True, eq=False)
class WordVectors:
    """Unit word vectors of one language, looked up by normalized key.

    Attributes:
        path: the source file.
        lang: the language its words were normalized in.
        keys: {key: row of `matrix`}.
        matrix: float32 [len(keys), dim], unit rows (memory-mapped from the cache).
        max_key_tokens: the most tokens in one key (bounds phrase matching).
        info: what reading dropped: {"words", "kept", "no_token", "zero", "duplicate"}.
    """
    path: str
    lang: str
    keys: dict
    matrix: np.ndarray
    max_key_tokens: int
    info: dict

    @property
    def dim(self):
        return int(self.matrix.shape[1])

    def __contains__(self, key):
        return key in self.keys

    def __len__(self):
        return len(self.keys)

    def rows(self, keys):
        """float64 [len(keys), dim], the unit vectors of `keys` (all must be known)."""
        if not keys:
            return np.zeros((0, self.dim))
        return np.asarray(self.matrix[[self.keys[k] for k in keys]], dtype=np.float64)


def cache_dir():
    """The cache folder: $VIFIDEL_CACHE_DIR, else $XDG_CACHE_HOME (or ~/.cache)/xm3600/vifidel."""
    if os.environ.get(CACHE_ENV):
        return os.environ[CACHE_ENV]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xm3600", "vifidel")


def _header(line):
    parts = line.split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


def _decoded_lines(f, path, start):
    for lineno, raw in enumerate(f, start=start):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(
                f"{path}:{lineno}: not UTF-8 ({e.reason} at byte {e.start}); a word2vec "
                f"binary file is read with format 'binary' (or a .bin name)") from None
        line = line.rstrip("\r\n")
        if line.strip():
            yield lineno, line


def _bad_line(chunk, dim, path, what):
    """Raises the error of the first malformed line of `chunk`."""
    for lineno, line in chunk:
        word, _, rest = line.partition(" ")
        values = rest.split()
        if len(values) != dim:
            raise InputError(f"{path}:{lineno}: word {word!r} has {len(values)} values; the "
                             f"file's vectors have {dim} ({what})")
        for value in values:
            try:
                number = float(value)
            except ValueError:
                raise InputError(f"{path}:{lineno}: word {word!r}: value {value!r} is not a "
                                 f"number") from None
            if not np.isfinite(number):
                raise InputError(f"{path}:{lineno}: word {word!r}: value {value!r} is not "
                                 f"finite")
    raise AssertionError("a chunk failed to parse but every line is well formed")


def _parse_chunk(chunk, dim, path, what):
    words = [line.partition(" ")[0] for _, line in chunk]
    joined = " ".join(line.partition(" ")[2] for _, line in chunk)
    try:
        with warnings.catch_warnings():
            # numpy warns (rather than raising) on text it cannot parse to the end.
            warnings.simplefilter("error", DeprecationWarning)
            values = np.fromstring(joined, dtype=np.float32, sep=" ")
    except (ValueError, DeprecationWarning):
        values = None
    if values is None or values.size != len(chunk) * dim or not np.isfinite(values).all():
        _bad_line(chunk, dim, path, what)
    return words, values.reshape(len(chunk), dim)


def read_text(path, max_words=None):
    """Reads a word2vec / fastText text file: (words, float32 [words, dim])."""
    words, parts = [], []
    with open(path, "rb") as f:
        lines = _decoded_lines(f, path, 1)
        first = next(lines, None)
        if first is None:
            raise InputError(f"{path}: empty vector file")
        header = _header(first[1])
        if header is not None:
            count, dim, what = header[0], header[1], "header"
            pending = []
        else:
            count, dim, what = None, len(first[1].split()) - 1, "first line"
            pending = [first]
        if dim < 1:
            raise InputError(f"{path}:1: expected a header '<words> <dim>' or a word and its "
                             f"vector, got {first[1][:80]!r}")
        for item in lines:
            pending.append(item)
            if len(pending) == _CHUNK_LINES:
                chunk_words, values = _parse_chunk(pending, dim, path, what)
                words += chunk_words
                parts.append(values)
                pending = []
                if max_words and len(words) >= max_words:
                    break
        if pending:
            chunk_words, values = _parse_chunk(pending, dim, path, what)
            words += chunk_words
            parts.append(values)
    if count is not None and not max_words and len(words) != count:
        raise InputError(f"{path}: the header announces {count} words, the file has "
                         f"{len(words)}")
    matrix = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
    if max_words:
        words, matrix = words[:max_words], matrix[:max_words]
    return words, matrix


def read_binary(path, max_words=None):
    """Reads a word2vec binary file: (words, float32 [words, dim])."""
    with open(path, "rb") as f:
        first = f.readline()
        header = _header(first.decode("ascii", errors="replace"))
        if header is None:
            raise InputError(f"{path}:1: a word2vec binary file starts with '<words> <dim>', "
                             f"got {first[:80]!r}")
        count, dim = header
        size = os.fstat(f.fileno()).st_size
        n = min(count, max_words) if max_words else count
        matrix = np.zeros((n, dim), np.float32)
        words = []
        if size == len(first):
            raise InputError(f"{path}: no vectors after the header")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            pos = len(first)
            for i in range(n):
                while pos < size and mm[pos] in b"\n\r":
                    pos += 1
                end = mm.find(b" ", pos, pos + _MAX_WORD_BYTES)
                hint = f"is the header's dimension {dim} right?"
                if end < 0:
                    raise InputError(f"{path}: word {i + 1} of {count} (byte {pos}): no word "
                                     f"ends within {_MAX_WORD_BYTES} bytes; {hint}")
                try:
                    word = mm[pos:end].decode("utf-8")
                except UnicodeDecodeError:
                    raise InputError(f"{path}: word {i + 1} of {count} (byte {pos}) is not "
                                     f"UTF-8; {hint} (a text file needs format 'text')") from None
                stop = end + 1 + 4 * dim
                if stop > size:
                    raise InputError(f"{path}: the file ends inside the vector of word "
                                     f"{i + 1} of {count} ({word!r}); {hint}")
                matrix[i] = np.frombuffer(mm[end + 1:stop], dtype="<f4")
                words.append(word)
                pos = stop
            rest = mm[pos:size].strip() if not max_words else b""
        if rest:
            raise InputError(f"{path}: {len(rest)} bytes follow the header's {count} words; "
                             f"is the header right?")
    if not np.isfinite(matrix).all():
        row = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise InputError(f"{path}: word {row + 1} ({words[row]!r}) has a value that is not "
                         f"finite; is the header's dimension {dim} right?")
    return words, matrix


def _unit_rows(words, matrix, lang):
    """Keys, the unit matrix of their first occurrences, and what was dropped."""
    tokens = text.normalize_batch(words, lang).split()
    norms = np.linalg.norm(matrix.astype(np.float64), axis=1)
    keys, rows = {}, []
    info = {"words": len(words), "no_token": 0, "zero": 0, "duplicate": 0}
    for i, parts in enumerate(tokens):
        key = " ".join(parts)
        if not key:
            info["no_token"] += 1
        elif norms[i] == 0:
            info["zero"] += 1
        elif key in keys:
            info["duplicate"] += 1
        else:
            keys[key] = len(rows)
            rows.append(i)
    info["kept"] = len(rows)
    unit = (matrix[rows] / norms[rows, None]).astype(np.float32)
    return list(keys), unit, info


def _digest(path, lang, fmt, max_words):
    st = os.stat(path)
    ident = [_CACHE_VERSION, os.path.realpath(path), st.st_size, st.st_mtime_ns, lang, fmt,
             max_words, text.DEFAULT_OPTIONS.describe("char")]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:32]


def _read_cache(folder, digest):
    meta_path = os.path.join(folder, f"{digest}.json")
    if not os.path.exists(meta_path):
        return None
    try:
        with open(meta_path, encoding="utf-8") as f:
            info = json.load(f)
        matrix = np.load(os.path.join(folder, f"{digest}.npy"), mmap_mode="r")
        with open(os.path.join(folder, f"{digest}.keys"), encoding="utf-8") as f:
            keys = f.read().split("\n") if info["kept"] else []
    except (OSError, ValueError, KeyError) as e:
        logging.warning("vifidel: ignoring a damaged vector cache %s (%s)", meta_path, e)
        return None
    if len(keys) != matrix.shape[0]:
        return None
    return keys, matrix, info


def _write_cache(folder, digest, keys, matrix, info):
    """Writes the cache files (each through a temporary name; the .json last marks it done)."""
    try:
        os.makedirs(folder, exist_ok=True)
        for suffix, write in ((".npy", lambda f: np.save(f, matrix)),
                              (".keys", lambda f: f.write("\n".join(keys).encode("utf-8"))),
                              (".json", lambda f: f.write(json.dumps(info).encode()))):
            with files.replacing(os.path.join(folder, digest + suffix), "wb") as f:
                write(f)
    except OSError as e:
        logging.warning("vifidel: could not write the vector cache in %s (%s); the file will "
                        "be parsed again next time", folder, e)
        return False
    return True


def load_vectors(path, lang, *, fmt="auto", max_words=None, cache=None):
    """Loads the word vectors of one language (cached on disk and in the process).

    Args:
        path: a word2vec text / binary or fastText .vec file.
        lang: the XM3600 language of its words (for their normalization).
        fmt: "auto", "text" or "binary".
        max_words: read only the first this many words (the most frequent).
        cache: the cache folder (default `cache_dir()`); False: no disk cache.

    Returns:
        A `WordVectors`.

    Raises:
        InputError: the file is missing, not in the format (a line of the wrong dimension,
            a value that is not a number, text that is not UTF-8: file and line named), or
            `lang` / `fmt` is unknown.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown vector format {fmt!r}; known: {', '.join(FORMATS)}")
    try:
        languages.check_langs([lang])
    except ValueError as e:
        raise InputError(str(e)) from None
    if not os.path.isfile(path):
        raise InputError(f"word vectors for {lang!r} not found: {path}")
    if fmt == "auto":
        fmt = "binary" if str(path).endswith(".bin") else "text"
    digest = _digest(path, lang, fmt, max_words)
    with _LOCK:
        if digest in _LOADED:
            return _LOADED[digest]
    folder = cache_dir() if cache is None else cache
    cached = _read_cache(folder, digest) if folder else None
    if cached is None:
        words, matrix = (read_binary if fmt == "binary" else read_text)(path, max_words)
        keys, matrix, info = _unit_rows(words, matrix, lang)
        info["dim"] = int(matrix.shape[1])
        info["source"] = os.path.realpath(path)
        if folder and _write_cache(folder, digest, keys, matrix, info):
            keys, matrix, info = _read_cache(folder, digest)
    else:
        keys, matrix, info = cached
    vectors = WordVectors(
        path=str(path), lang=lang, keys={k: i for i, k in enumerate(keys)}, matrix=matrix,
        max_key_tokens=max((k.count(" ") + 1 for k in keys), default=1),
        info={k: info[k] for k in ("words", "kept", "no_token", "zero", "duplicate")})
    with _LOCK:
        return _LOADED.setdefault(digest, vectors)


def vector_paths(specs, langs):
    """The vector file of each language, from patterns and `lang=path` entries.

    Args:
        specs: strings, each `lang=PATH` or a path pattern holding "{lang}"
            (e.g. "vectors/wiki.{lang}.align.vec"); a `lang=PATH` entry wins over a pattern.
        langs: the languages that need vectors.

    Returns:
        {lang: path}, for every language of `langs`.

    Raises:
        InputError: an entry is neither form, or a language has no existing file (the
            message names the language and the path tried).
    """
    if isinstance(specs, str):
        specs = [specs]
    explicit, patterns = {}, []
    for spec in specs:
        lang, sep, path = spec.partition("=")
        if sep and LANG_PLACEHOLDER not in lang and lang in languages.XM3600_LANGS:
            explicit[lang] = path
        elif LANG_PLACEHOLDER in spec:
            patterns.append(spec)
        else:
            raise InputError(f"vectors {spec!r}: expected LANG=PATH (a known language) or a "
                             f"path pattern with {LANG_PLACEHOLDER}")
    out = {}
    for lang in langs:
        tried = [explicit[lang]] if lang in explicit else [
            p.replace(LANG_PLACEHOLDER, lang) for p in patterns]
        found = [p for p in tried if os.path.isfile(p)]
        if not found:
            raise InputError(f"no word vectors for {lang!r}: "
                             + (f"{', '.join(tried)} not found" if tried else
                                f"no LANG=PATH entry or pattern given ({', '.join(specs)})"))
        out[lang] = found[0]
    return out


def load_languages(specs, langs, **kwargs):
    """Loads the vectors of several languages, which must share one space (one dimension).

    Args:
        specs: as `vector_paths`.
        langs: languages.
        **kwargs: passed to `load_vectors`.

    Returns:
        {lang: WordVectors}.

    Raises:
        InputError: as `vector_paths` and `load_vectors`, or two files of different
            dimensions (both named).
    """
    loaded = {lang: load_vectors(path, lang, **kwargs)
              for lang, path in vector_paths(specs, langs).items()}
    dims = {}
    for lang, vectors in loaded.items():
        dims.setdefault(vectors.dim, (lang, vectors.path))
    if len(dims) > 1:
        (d1, (l1, p1)), (d2, (l2, p2)) = list(dims.items())[:2]
        raise InputError(f"word vectors of one space must share a dimension: {p2} ({l2}) has "
                         f"{d2}, {p1} ({l1}) has {d1}")
    return loaded
