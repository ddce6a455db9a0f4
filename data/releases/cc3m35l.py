"""Reader of the CC3M-35L release: translation files and the user's CC3M images.

Manual directory: `cc3m_mt_{train,dev}.jsonl[.bz2|.gz]` and `train/`, `dev/` image folders,
each img2dataset webdataset shards (00000.tar, ... of NNNNNNNNN.jpg) or any tree of
NNNNNNNNN.jpg. Translation lines have COCO-35L's fields and the record key `image_id`
(older copies: `rec_num`): the caption's 0-based row in the CC3M TSV, also img2dataset's
key for the image when run on it unshuffled. English is the source `caption_tokenized`.
"""

import os
import tarfile

import errors
from data.jsonl import FormatError
from data.releases import coco35l
from data.releases.coco35l import find_file

SPLITS = ("train", "dev")
KEY_FIELDS = ("image_id", "rec_num")
_TEXT_FIELDS = ("trg_lang", "caption_tokenized", "translation_tokenized")
# Keys below this are remembered in a bitmap (a byte per key) instead of a set.
_BITMAP_KEYS = 1 << 26


def parse_key(value):
    """The integer record key of an `image_id`/`rec_num` or an image file stem, else None."""
    text = str(value)
    return int(text) if text.isdigit() and text.isascii() else None


def stream_captions(stream, langs):
    """Yields (key, lang, caption) of a translation `LineStream` in one pass ("en": the source).
    A key's English caption comes once (its first line's); memory holds a byte per key, not the
    captions. FormatError names the file and line of a malformed line."""
    wanted = set(langs)
    english = "en" in wanted
    seen, seen_large = bytearray(), set()  # A byte per key below _BITMAP_KEYS, a set above.
    for lineno, row in stream:
        raw_key = row.image_id if row.image_id is not None else row.rec_num
        if (key := parse_key(raw_key)) is None:
            raise FormatError(f"{stream.path}:{lineno}: needs an integer record key in one of "
                              f"{', '.join(KEY_FIELDS)}, got {raw_key!r}")
        if row.caption_tokenized is None:
            raise FormatError(f"{stream.path}:{lineno}: expected an object with string fields "
                              f"{', '.join(_TEXT_FIELDS)}")
        if english and key >= _BITMAP_KEYS and key not in seen_large:
            seen_large.add(key)
            yield key, "en", row.caption_tokenized
        elif english and key < _BITMAP_KEYS:
            if key >= len(seen):
                seen.extend(bytes(max(key + 1 - len(seen), len(seen))))
            if not seen[key]:
                seen[key] = 1
                yield key, "en", row.caption_tokenized
        if row.trg_lang in wanted:
            yield key, row.trg_lang, row.translation_tokenized


def open_translations(path):
    """A `jsonl.LineStream` over a CC3M-35L translation file (for `stream_captions`)."""
    return coco35l.open_translations(path, required=_TEXT_FIELDS)


def translations_path(manual_dir, split):
    """The translation file of a split, or FileNotFoundError saying where it comes from."""
    return find_file(manual_dir, f"cc3m_mt_{split}.jsonl", f"CC3M-35L {split} translations",
                     f"https://storage.googleapis.com/crossmodal-3600/cc3m_mt_{split}.jsonl.gz")


def image_dir(manual_dir, split):
    """The folder of a split's images, or a clear error saying where it goes."""
    folder = os.path.join(manual_dir, split)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"missing CC3M {split} images: expected the folder {folder} with img2dataset "
            f"shards (00000.tar, ...) or NNNNNNNNN.jpg files; download them from the URLs "
            f"of the CC3M TSV (docs/files.md lists every release file)")
    return folder


def image_files(folder):
    """([tar shards], [(key, path)] of NNNNNNNNN.jpg) under `folder`, sorted; others ignored."""
    tars, files = [], []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.splitext(name)[1] == ".tar":
                tars.append(path)
            elif (key := _jpeg_key(name)) is not None:
                files.append((key, path))
    return tars, files


def _jpeg_key(name):
    """The record key of a file named NNNNNNNNN.jpg (or .jpeg, any case; in any folder), else
    None."""
    stem, ext = os.path.splitext(os.path.basename(name))
    return parse_key(stem) if ext.lower() in (".jpg", ".jpeg") else None


def iter_tar(path):
    """Yields (key, "path/member", jpeg bytes) of one img2dataset tar; FormatError if unreadable."""
    with errors.reraised(FormatError, tarfile.TarError, f"{path}: not a readable tar shard: "), \
            tarfile.open(path) as tar:
        for member in tar:
            if member.isfile() and (key := _jpeg_key(member.name)) is not None:
                yield key, f"{path}/{member.name}", tar.extractfile(member).read()
