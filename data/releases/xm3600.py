"""Reader of the Crossmodal-3600 release: `captions.jsonl` and `images/<image/key>.jpg`.

Each line: {"image/key": "000411001ff7dd4f", "image/locale": "ar", "ar": {"caption": [...],
"caption/tokenized": [...], "caption/tokenized/lowercase": [...]}, "bn": {...}, ...}.
`read_captions` gives a `Record` per image, `read_references` every language's references.
"""

import dataclasses
import functools
import operator
import os
import typing

import msgspec

import files
from data import jsonl, languages
from data.jsonl import FormatError


@dataclasses.dataclass(frozen=True)
class Record:
    """One XM3600 image: `key` (also its file name), `locale` (where it was taken), and per
    language its `captions` and `caption/tokenized` strings (`tokenized`)."""
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
        at = f"{where}: image {obj['image/key']!r}, language {lang!r}"
        if not isinstance(value, dict) or not isinstance(value.get("caption"), list):
            raise FormatError(f"{at}: expected an object with a list field 'caption'")
        if not all(isinstance(c, str) for c in value["caption"]):
            raise FormatError(f"{at}: captions must be strings")
        captions[lang] = list(value["caption"])
        tokenized[lang] = list(value.get("caption/tokenized", value["caption"]))
    return Record(obj["image/key"], obj["image/locale"], captions, tokenized)


def _check_file(path):
    """FileNotFoundError for no file at `path`, FormatError for a folder or a FIFO there."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"XM3600 captions file not found: {path}")
    if problem := files.not_a_file(path, "XM3600 captions file"):
        raise FormatError(problem)


def read_captions(path):
    """`Record`s of a `captions.jsonl`, in file order.
    FileNotFoundError; FormatError naming file and line for a malformed line or a repeated key."""
    _check_file(path)
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


@dataclasses.dataclass(frozen=True)
class References:
    """The references of a captions.jsonl, by language: `by_lang[lang]` = (keys, refs) as
    `references` gives them; `keys`: every image key; `field`: the caption field used."""
    field: str
    keys: list
    by_lang: dict

    def get(self, lang):
        """(keys, refs) of `lang`; two empty lists if no image has captions in it."""
        return self.by_lang.get(lang, ([], []))


def references_by_language(records, field="caption"):
    """`References` of `read_captions` records."""
    by_lang = {lang: references(records, lang, field) for lang in languages.XM3600_LANGS}
    return References(field, [r.key for r in records],
                      {lang: pair for lang, pair in by_lang.items() if pair[0]})


# Unused fields are msgspec.Raw (never built) so `_count_keys` can count them for the
# repeated-key check (data/jsonl.py).
_UNUSED = msgspec.Raw | msgspec.UnsetType
_FIELD_NAMES = {"tokenized": "caption/tokenized", "lowercase": "caption/tokenized/lowercase"}


def _count_keys(lines):
    """The keys of decoded lines (image/key, image/locale, each language's key and fields).
    Every loop runs in C (map, filter, list.count): a Python loop over XM3600's 130,000 language
    objects took longer than decoding them."""
    count, is_set = 2 * len(lines), functools.partial(operator.is_not, msgspec.UNSET)
    for lang in languages.XM3600_LANGS:
        present = list(filter(is_set, map(operator.attrgetter(lang), lines)))
        count += 2 * len(present)  # The language's key and its "caption".
        for field in _FIELD_NAMES:
            count += len(present) - list(map(operator.attrgetter(field), present)).count(
                msgspec.UNSET)
    return count


@functools.cache
def _line_decoder(field):
    """A decoder of the lines that `_parse_record` accepts, keeping what `field` needs (a
    tokenized field not wanted is skipped, never built)."""
    tokenized = _UNUSED if field == "caption" else list[str] | msgspec.UnsetType
    captions = msgspec.defstruct(
        "_Captions", [("caption", list[str]), ("tokenized", tokenized, msgspec.UNSET),
                      ("lowercase", _UNUSED, msgspec.UNSET)], rename=_FIELD_NAMES, gc=False)
    non_empty = typing.Annotated[str, msgspec.Meta(min_length=1)]
    line = msgspec.defstruct(
        "_Line", [("key", non_empty), ("locale", non_empty)] + [
            (lang, captions | msgspec.UnsetType, msgspec.UNSET)
            for lang in languages.XM3600_LANGS],
        rename={"key": "image/key", "locale": "image/locale"}, forbid_unknown_fields=True,
        gc=False)
    return msgspec.json.Decoder(line)


def _references_in_bulk(path, field):
    """`read_references` for a well-formed file, or None (then the slow path names the error)."""
    if not (lines := jsonl.decode_lines(path, _line_decoder(field), count_keys=_count_keys)):
        return None
    keys = [line.key for line in lines]
    if len(set(keys)) != len(keys):
        return None
    by_lang = {}
    for lang in languages.XM3600_LANGS:
        present = [(key, value) for key, value in zip(keys, map(operator.attrgetter(lang), lines),
                                                      strict=True) if value is not msgspec.UNSET]
        if present:
            # As `_parse_record`: the captions stand in for a missing tokenized field.
            by_lang[lang] = ([key for key, _ in present], [
                v.caption if field == "caption" or v.tokenized is msgspec.UNSET else v.tokenized
                for _, v in present])
    return References(field, keys, by_lang)


def read_references(path, field="caption"):
    """`References` of a `captions.jsonl` ("caption" or "caption/tokenized").
    Accepts and rejects exactly what `read_captions` does, with the same messages."""
    _check_file(path)
    return _references_in_bulk(path, field) or references_by_language(read_captions(path), field)


def image_path(root, key):
    """Path of the image of `key` in a release folder laid out as `images/<key>.jpg`."""
    return os.path.join(root, "images", f"{key}.jpg")


def references(records, lang, field="caption"):
    """(keys, refs) of the images that have captions in `lang`."""
    pairs = [(r.key, (r.captions if field == "caption" else r.tokenized)[lang])
             for r in records if lang in r.captions]
    return [key for key, _ in pairs], [refs for _, refs in pairs]
