"""Reader of the Crossmodal-3600 release files.

The release is `captions.jsonl` (one JSON object per image) and a folder
`images/<image/key>.jpg`. Each line looks like

    {"image/key": "000411001ff7dd4f", "image/locale": "ar",
     "ar": {"caption": [...], "caption/tokenized": [...],
            "caption/tokenized/lowercase": [...]},
     "bn": {...}, ...}

This module parses and validates those lines; everything that reads XM3600
(the CIDEr tool, the evaluators, the TFDS builder) goes through it so that a
malformed file is reported the same way everywhere: file and line number.
"""

import dataclasses
import os

from data import jsonl, languages
from data.jsonl import FormatError

CAPTION_FIELDS = ("caption", "caption/tokenized", "caption/tokenized/lowercase")


@dataclasses.dataclass(frozen=True)
class Record:
    """One XM3600 image and its references.

    Attributes:
        key: the `image/key`, also the image's file name without `.jpg`.
        locale: the `image/locale`, the language of the region it was taken in.
        captions: language -> list of human captions (the `caption` field).
        tokenized: language -> list of `caption/tokenized` strings.
    """
    key: str
    locale: str
    captions: dict
    tokenized: dict


def _parse_record(obj, where):
    for field in ("image/key", "image/locale"):
        if not isinstance(obj.get(field), str) or not obj[field]:
            raise FormatError(f"{where}: missing or empty string field {field!r}")
    captions, tokenized = {}, {}
    for lang, value in obj.items():
        if lang in ("image/key", "image/locale"):
            continue
        if lang not in languages.XM3600_LANGS:
            raise FormatError(
                f"{where}: image {obj['image/key']!r} has unknown language key {lang!r}; "
                f"known: {', '.join(languages.XM3600_LANGS)}")
        if not isinstance(value, dict) or not isinstance(value.get("caption"), list):
            raise FormatError(
                f"{where}: image {obj['image/key']!r}, language {lang!r}: expected an "
                f"object with a list field 'caption'")
        if not all(isinstance(c, str) for c in value["caption"]):
            raise FormatError(
                f"{where}: image {obj['image/key']!r}, language {lang!r}: captions must "
                f"be strings")
        captions[lang] = list(value["caption"])
        tokenized[lang] = list(value.get("caption/tokenized", value["caption"]))
    return Record(obj["image/key"], obj["image/locale"], captions, tokenized)


def read_captions(path):
    """Reads and validates a `captions.jsonl` file.

    Args:
        path: path of the file (local, or anything `open` accepts).

    Returns:
        A list of `Record`, in file order.

    Raises:
        FileNotFoundError: the file does not exist.
        FormatError: a line is malformed, or an image key repeats; the message
            names the file and the line number.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"XM3600 captions file not found: {path}")
    records, first_seen = [], {}
    for where, obj in jsonl.read_objects(path):
        record = _parse_record(obj, where)
        if record.key in first_seen:
            raise FormatError(
                f"{where}: image key {record.key!r} repeats line {first_seen[record.key]}")
        first_seen[record.key] = where.rsplit(":", 1)[1]
        records.append(record)
    if not records:
        raise FormatError(f"{path}: no records (the file is empty)")
    return records


def image_path(root, key):
    """Path of the image of `key` in a release folder laid out as `images/<key>.jpg`."""
    return os.path.join(root, "images", f"{key}.jpg")


def references(records, lang, field="caption"):
    """Returns (keys, refs) for the images that have captions in `lang`.

    Args:
        records: output of `read_captions`.
        lang: language code.
        field: "caption" (the human captions) or "caption/tokenized".
    """
    keys, refs = [], []
    for r in records:
        source = r.captions if field == "caption" else r.tokenized
        if lang in source:
            keys.append(r.key)
            refs.append(source[lang])
    return keys, refs
