"""Reader of the CC3M-35L release: translation files and the user's CC3M images.

Manual directory layout (the README's Datasets section says where each file comes from):

    <manual_dir>/cc3m_mt_train.jsonl.bz2   translations of the CC3M training captions
    <manual_dir>/cc3m_mt_dev.jsonl.bz2     translations of the CC3M validation captions
    <manual_dir>/train/                    training images, in either form:
        00000.tar, 00001.tar, ...          img2dataset webdataset shards holding
                                           NNNNNNNNN.jpg (+ .txt, .json) per image
        or any tree of NNNNNNNNN.jpg       (img2dataset "files" output, or a plain folder)
    <manual_dir>/dev/                      validation images, same forms

The translation files may be `.jsonl`, `.jsonl.bz2` or `.jsonl.gz`. Each line
is one caption in one target language, with the fields of COCO-35L's files
(`src_lang`, `trg_lang`, `caption_tokenized`, `translation_tokenized`,
`backtranslation_tokenized`) and the record key `image_id` (older copies:
`rec_num`): the 0-based row of the caption in the CC3M TSV file, which is also
the key img2dataset gives the image when run on that TSV unshuffled. English
is the `caption_tokenized` source caption.
"""

import os
import tarfile

from data import jsonl
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


def _check_line(where, line):
    return coco35l.check_translation(where, line, required=_TEXT_FIELDS)


class _Seen:
    """Which integer keys have been seen: a bytearray for small keys, a set for the rest."""

    def __init__(self):
        self._bits, self._large = bytearray(), set()

    def add(self, key):
        """Marks `key`; True if it was not seen before."""
        if key >= _BITMAP_KEYS:
            new = key not in self._large
            self._large.add(key)
            return new
        if key >= len(self._bits):
            self._bits.extend(bytes(max(key + 1 - len(self._bits), len(self._bits))))
        new = not self._bits[key]
        self._bits[key] = 1
        return new


def stream_captions(stream, langs):
    """Yields (key, lang, caption) of a translation file in one pass; en: the source captions.

    Each record key's English caption comes once (its first line's
    `caption_tokenized`); memory holds a byte per key seen, not the captions.

    Args:
        stream: a `jsonl.LineStream` of the file (see `open_translations`).
        langs: language codes to keep ("en" = the source captions).

    Raises:
        FormatError: a malformed line; the message names the file and line.
    """
    wanted = set(langs)
    english = "en" in wanted
    seen = _Seen()
    for lineno, row in stream:
        raw_key = row.image_id if row.image_id is not None else row.rec_num
        key = parse_key(raw_key) if raw_key is not None else None
        if key is None:
            raise FormatError(f"{stream.path}:{lineno}: needs an integer record key in one of "
                              f"{', '.join(KEY_FIELDS)}, got {raw_key!r}")
        if row.caption_tokenized is None:
            raise FormatError(f"{stream.path}:{lineno}: expected an object with string fields "
                              f"{', '.join(_TEXT_FIELDS)}")
        if english and seen.add(key):
            yield key, "en", row.caption_tokenized
        if row.trg_lang in wanted:
            yield key, row.trg_lang, row.translation_tokenized


def open_translations(path):
    """A `jsonl.LineStream` over a CC3M-35L translation file (for `stream_captions`)."""
    return jsonl.LineStream(path, coco35l.TRANSLATION_DECODER, _check_line)


def translations_path(manual_dir, split):
    """The translation file of a split, or FileNotFoundError saying where it comes from."""
    if split not in SPLITS:
        raise ValueError(f"unknown CC3M-35L split {split!r}; known: {', '.join(SPLITS)}")
    return find_file(manual_dir, f"cc3m_mt_{split}.jsonl", f"CC3M-35L {split} translations",
                     f"https://storage.googleapis.com/crossmodal-3600/cc3m_mt_{split}.jsonl.bz2")


def image_dir(manual_dir, split):
    """The folder of a split's images, or a clear error saying where it goes."""
    folder = os.path.join(manual_dir, split)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"missing CC3M {split} images: expected the folder {folder} with img2dataset "
            f"shards (00000.tar, ...) or NNNNNNNNN.jpg files; download them from the URLs "
            f"of the CC3M TSV (see the README's Datasets section)")
    return folder


def image_files(folder):
    """The images under `folder`, in sorted order: ([tar shard paths], [(key, path)] of files).

    Keys are the integer file stems (img2dataset's record keys); other files are
    ignored.
    """
    tars, files = [], []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            stem, ext = os.path.splitext(name)
            if ext == ".tar":
                tars.append(path)
            elif ext.lower() in (".jpg", ".jpeg") and parse_key(stem) is not None:
                files.append((parse_key(stem), path))
    return tars, files


def iter_tar(path):
    """Yields (key, "path/member", jpeg bytes) of the images of one img2dataset tar shard.

    Raises:
        FormatError: the file is not a readable tar archive (names it).
    """
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                stem, ext = os.path.splitext(os.path.basename(member.name))
                if member.isfile() and ext.lower() in (".jpg", ".jpeg") and \
                        parse_key(stem) is not None:
                    yield parse_key(stem), f"{path}/{member.name}", \
                        tar.extractfile(member).read()
    except tarfile.TarError as e:
        raise FormatError(f"{path}: not a readable tar shard ({e})") from None
