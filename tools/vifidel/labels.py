"""Object labels of images for VIFIDEL: Open Images CSV files and a simple JSONL layout.

XM3600's images are Open Images images, keyed by their Open Images ImageID, so their labels
come in Open Images' own files:

- image-level labels, `*-annotations-human-imagelabels*.csv` (and the machine-generated
  `*-annotations-machine-imagelabels*.csv`): columns ImageID, Source, LabelName, Confidence.
  A human-verified row has Confidence 1 (the object is there) or 0 (verified absent); a
  machine-generated row has its classifier's confidence. Kept: rows with Confidence >=
  `min_confidence` (default 1: the verified positives only). A label counts once per image.
- boxes, `*-annotations-bbox.csv`: the same first columns, then XMin, XMax, YMin, YMax, ...;
  one row per box, and a label's weight is its number of boxes.
- class descriptions, MID -> display name: `oidv7-class-descriptions.csv` (header
  LabelName,DisplayName) or the older header-less `class-descriptions*.csv`.

Or JSONL, one object per line: {"image/key": key, "labels": [name, ...]}, names in the label
language (a repeated name weighs more).

`read_labels` keeps only the images asked for (an Open Images file of millions of rows is
filtered on its ImageID before any CSV parsing) and returns {key: Counter{name: weight}}.
"""

import collections
import csv
import glob
import os

from data import jsonl
from errors import InputError

IMAGE_LEVEL_COLUMNS = ("ImageID", "LabelName", "Confidence")
BOX_COLUMN = "XMin"
DESCRIPTION_HEADER = ("labelname", "displayname")
_EXAMPLES = 3


def expand(patterns):
    """Files of glob patterns (or plain paths), in order, each once.

    Raises:
        InputError: a pattern that matches no file (named).
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    files = []
    for pattern in patterns:
        matched = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else (
            [pattern] if os.path.isfile(pattern) else [])
        if not matched:
            raise InputError(f"label file not found: {pattern}")
        files += [m for m in matched if m not in files]
    return files


def read_class_descriptions(path):
    """Reads an Open Images class-description CSV: {MID: display name}.

    Raises:
        InputError: the file is missing, or a row is not "MID,name" (file:line).
    """
    if not os.path.isfile(path):
        raise InputError(f"class descriptions not found: {path}")
    names = {}
    with open(path, newline="", encoding="utf-8") as f:
        try:
            for lineno, row in enumerate(csv.reader(f), start=1):
                if not row:
                    continue
                if lineno == 1 and tuple(c.strip().lower() for c in row) == DESCRIPTION_HEADER:
                    continue
                if len(row) != 2 or not row[0].strip() or not row[1].strip():
                    raise InputError(f"{path}:{lineno}: expected 'MID,display name', got "
                                     f"{','.join(row)[:80]!r}")
                names.setdefault(row[0].strip(), row[1].strip())
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: not UTF-8 ({e.reason})") from None
    if not names:
        raise InputError(f"{path}: no class descriptions")
    return names


def _confidence(text, where):
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: column Confidence: not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise InputError(f"{where}: column Confidence: {value} is outside [0, 1]")
    return value


def _read_open_images(path, keys, names, min_confidence, out):
    with open(path, "rb") as f:
        header_line = f.readline().decode("utf-8", errors="replace").lstrip("\ufeff")
        header = next(csv.reader([header_line]), [])
        header = [c.strip() for c in header]
        missing = [c for c in IMAGE_LEVEL_COLUMNS if c not in header]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)}; found: "
                             f"{', '.join(header) or 'nothing'} (an Open Images label file "
                             f"has ImageID,Source,LabelName,Confidence)")
        column = {name: header.index(name) for name in IMAGE_LEVEL_COLUMNS}
        boxes = BOX_COLUMN in header
        for lineno, raw in enumerate(f, start=2):
            # ImageIDs hold no comma or quote: filter before parsing the row.
            comma = raw.find(b",")
            if raw[:comma].decode("ascii", errors="replace").strip('"') not in keys:
                continue
            where = f"{path}:{lineno}"
            try:
                row = next(csv.reader([raw.decode("utf-8")]))
            except UnicodeDecodeError as e:
                raise InputError(f"{where}: not UTF-8 ({e.reason})") from None
            if len(row) < len(header):
                raise InputError(f"{where}: {len(row)} cells; the header has {len(header)}")
            if _confidence(row[column["Confidence"]], where) < min_confidence:
                continue
            mid = row[column["LabelName"]].strip()
            if mid not in names:
                raise InputError(f"{where}: label {mid!r} is not in the class descriptions")
            labels = out.setdefault(row[column["ImageID"]].strip('"'), {})
            # Boxes count once each; image-level rows once per label (several sources may
            # verify the same label).
            labels.setdefault(path, collections.Counter())
            if boxes or not labels[path][names[mid]]:
                labels[path][names[mid]] += 1


def _read_jsonl(path, keys, out):
    seen = {}
    for where, obj in jsonl.read_objects(path, error=InputError):
        key, labels = obj.get("image/key"), obj.get("labels")
        if not isinstance(key, str) or not key:
            raise InputError(f"{where}: \"image/key\" must be a non-empty string, got {key!r}")
        if not isinstance(labels, list) or not all(isinstance(x, str) and x.strip()
                                                   for x in labels):
            raise InputError(f"{where}: image {key!r}: \"labels\" must be a list of non-empty "
                             f"strings, got {labels!r}")
        if key in seen:
            raise InputError(f"{where}: image {key!r} appears twice (first at {seen[key]})")
        seen[key] = where
        if key in keys:
            out.setdefault(key, {})[path] = collections.Counter(x.strip() for x in labels)


def read_labels(paths, keys, *, class_descriptions=None, min_confidence=1.0):
    """Reads the labels of the images `keys` from label files.

    Args:
        paths: label files (or glob patterns): Open Images CSVs (image-level or boxes) and / or
            JSONL files; a `.jsonl` (or `.jsonl.gz`, `.jsonl.bz2`) name is read as JSONL.
        keys: the image keys wanted.
        class_descriptions: the Open Images class-description CSV (needed for CSVs).
        min_confidence: keep Open Images rows with at least this Confidence.

    Returns:
        {key: Counter{label name: weight}} for the keys that have a label; where several files
        label one image, a label's weight is the largest any of them gives.

    Raises:
        InputError: a missing file or column, a malformed row (file:line), a MID without a
            class description, or no label for any of `keys` (a label file of other images).
    """
    keys = set(keys)
    files = expand(paths)
    names = None
    out = {}
    for path in files:
        if ".jsonl" in os.path.basename(path):
            _read_jsonl(path, keys, out)
            continue
        if names is None:
            if not class_descriptions:
                raise InputError(f"{path}: an Open Images label file needs the class "
                                 f"descriptions (MID -> name) file")
            names = read_class_descriptions(class_descriptions)
        _read_open_images(path, keys, names, min_confidence, out)
    labels = {}
    for key, by_file in out.items():
        merged = collections.Counter()
        for counts in by_file.values():
            merged |= counts  # the largest weight of each label
        if merged:
            labels[key] = merged
    if not labels:
        example = ", ".join(sorted(keys)[:_EXAMPLES])
        raise InputError(f"{', '.join(files)}: no label for any of the {len(keys)} images "
                         f"asked for (e.g. {example}); are these the labels of other images?")
    return labels


def missing_labels(labels, keys):
    """The keys of `keys` without labels, in order."""
    return [key for key in keys if key not in labels]
