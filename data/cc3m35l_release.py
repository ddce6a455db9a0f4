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

import collections
import logging
import os
import tarfile

from data import jsonl, languages
from data.coco35l_release import find_file
from data.jsonl import FormatError

SPLITS = ("train", "dev")
KEY_FIELDS = ("image_id", "rec_num")
_TEXT_FIELDS = ("trg_lang", "caption_tokenized", "translation_tokenized")


def parse_key(value):
    """The integer record key of an `image_id`/`rec_num` or an image file stem, else None."""
    text = str(value)
    return int(text) if text.isdigit() else None


def read_translations(path, langs):
    """Reads a translation file into {lang: {key: caption}} for `langs` (en: the sources).

    Raises:
        FormatError: a malformed line; the message names the file and line.
    """
    wanted = set(langs)
    captions = {lang: {} for lang in langs}
    for where, row in jsonl.read_objects(path):
        if not all(isinstance(row.get(k), str) for k in _TEXT_FIELDS):
            raise FormatError(f"{where}: expected an object with string fields "
                              f"{', '.join(_TEXT_FIELDS)}")
        raw_key = next((row[k] for k in KEY_FIELDS if k in row), None)
        key = parse_key(raw_key) if raw_key is not None else None
        if key is None:
            raise FormatError(f"{where}: needs an integer record key in one of "
                              f"{', '.join(KEY_FIELDS)}, got {raw_key!r}")
        if "en" in wanted:
            captions["en"].setdefault(key, row["caption_tokenized"])
        if row["trg_lang"] in wanted:
            captions[row["trg_lang"]][key] = row["translation_tokenized"]
    return captions


def image_dir(manual_dir, split):
    """The folder of a split's images, or a clear error saying where it goes."""
    folder = os.path.join(manual_dir, split)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"missing CC3M {split} images: expected the folder {folder} with img2dataset "
            f"shards (00000.tar, ...) or NNNNNNNNN.jpg files; download them from the URLs "
            f"of the CC3M TSV (see the README's Datasets section)")
    return folder


def iter_images(folder):
    """Yields (key, jpeg bytes) for every image under `folder`: tar shards or files.

    Keys are the integer file stems (img2dataset's record keys); other files are
    ignored. Shards and files are visited in sorted order.
    """
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            stem, ext = os.path.splitext(name)
            if ext == ".tar":
                yield from _iter_tar(path)
            elif ext.lower() in (".jpg", ".jpeg") and parse_key(stem) is not None:
                with open(path, "rb") as f:
                    yield parse_key(stem), f.read()


def _iter_tar(path):
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                stem, ext = os.path.splitext(os.path.basename(member.name))
                if member.isfile() and ext.lower() in (".jpg", ".jpeg") and \
                        parse_key(stem) is not None:
                    yield parse_key(stem), tar.extractfile(member).read()
    except tarfile.TarError as e:
        raise FormatError(f"{path}: not a readable tar shard ({e})") from None


def read_split(manual_dir, split, langs):
    """Reads the captions of one split: ({lang: {key: caption}}, translation file path).

    Args:
        manual_dir: the manual download folder (layout in the module docstring).
        split: "train" or "dev".
        langs: language codes from TRAIN_35L_LANGS.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown CC3M-35L split {split!r}; known: {', '.join(SPLITS)}")
    langs = languages.check_langs(langs, known=languages.TRAIN_35L_LANGS,
                                  what="CC3M-35L language")
    path = find_file(manual_dir, f"cc3m_mt_{split}.jsonl", f"CC3M-35L {split} translations",
                     f"https://storage.googleapis.com/crossmodal-3600/cc3m_mt_{split}.jsonl.bz2")
    return read_translations(path, langs), path


def report_missing(captions, found_keys, where):
    """Logs once how many captioned records have no image; returns {lang: count}."""
    missing = collections.Counter()
    for lang, by_key in captions.items():
        missing[lang] = sum(1 for key in by_key if key not in found_keys)
    if any(missing.values()):
        logging.warning("%s: %d captioned records have no image (per language: %s)", where,
                        max(missing.values()), dict(missing))
    return dict(missing)
