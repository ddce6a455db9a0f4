"""Reader of the COCO-35L release: Karpathy split, translation files and COCO images.

Manual directory (docs/files.md says where each file comes from):

    dataset_coco.json                     Karpathy split (caption_datasets.zip)
    coco_mt_{train,dev}.jsonl[.bz2|.gz]   translations of train+restval / val captions
    train2014/, val2014/                  COCO images (or both under images/)

Translation lines: {"image_id": "<cocoid>_<n>", "src_lang": "en", "trg_lang": "de",
"caption_tokenized", "translation_tokenized", "backtranslation_tokenized"}. English comes
from the Karpathy `tokens` (what was translated). Splits: "train" = Karpathy train +
restval (113,287 images), "dev" = val (5,000). Both files are decoded with msgspec;
`stream_translations` reads the 19 million training lines in one streaming pass.
`read_split` gathers a split in memory (demo, dev, the "files" reader); the build streams.
"""

import collections
import dataclasses
import functools
import logging
import os

import msgspec

import errors
from data import jsonl, languages
from data.jsonl import FormatError

KARPATHY_FILE = "dataset_coco.json"
SPLITS = {"train": ("train", "restval"), "dev": ("val",)}
_MT_FIELDS = ("image_id", "trg_lang", "translation_tokenized")


class _Sentence(msgspec.Struct):
    tokens: list[str]


class _KarpathyImage(msgspec.Struct):
    cocoid: int
    split: str
    filepath: str
    filename: str
    sentences: msgspec.Raw  # Decoded image by image: 6 million tokens never live at once.


class _KarpathyFile(msgspec.Struct):
    images: list[_KarpathyImage]


_SENTENCES = msgspec.json.Decoder(list[_Sentence])


class TranslationLine(msgspec.Struct):
    """The fields of a translation line that COCO-35L and CC3M-35L readers use."""
    trg_lang: str
    translation_tokenized: str
    image_id: str | int | None = None
    rec_num: str | int | None = None
    caption_tokenized: str | None = None


TRANSLATION_DECODER = msgspec.json.Decoder(TranslationLine)


@dataclasses.dataclass(frozen=True)
class Example:
    """One image with its captions in one language (`read_split`'s key), in `<cocoid>_<n>`
    order."""
    cocoid: int
    image_path: str
    captions: tuple


@dataclasses.dataclass
class ReadStats:
    """What was dropped while reading, reported once instead of per record."""
    unknown_image: int = 0     # caption records whose cocoid is not in the Karpathy file
    wrong_split: int = 0       # caption records of an image from another Karpathy split
    missing_image_file: int = 0  # images listed but absent from the image folder

    def report(self, where):
        """Logs one warning summarising the dropped records, if any."""
        if parts := [f"{n} {what}" for n, what in (
            (self.unknown_image, f"caption records name an image that is not in {KARPATHY_FILE}"),
            (self.wrong_split, "caption records name an image of another Karpathy split"),
            (self.missing_image_file, "(image, language) pairs have no image file")) if n]:
            logging.warning("%s: skipped %s", where, "; ".join(parts))


def find_file(manual_dir, name, what, source):
    """Path of `name` (or .bz2/.gz) in `manual_dir`; else FileNotFoundError naming `source`."""
    for suffix in ("", ".bz2", ".gz"):
        path = os.path.join(manual_dir, name + suffix)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(
        f"missing {what}: expected {os.path.join(manual_dir, name)} (or .bz2/.gz); "
        f"get it from {source} and put it there (docs/files.md lists every release file)")


def read_karpathy(path):
    """{cocoid: (split, "filepath/filename", [tokenized English captions])} of the Karpathy file;
    FormatError names the file and the line or field at fault."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        parsed = msgspec.json.decode(raw, type=_KarpathyFile)
    except msgspec.ValidationError as e:  # It names the field: "... - at `$.images[3].cocoid`".
        raise FormatError(f"{path}: {e}") from None
    except (msgspec.DecodeError, RecursionError) as e:  # Not JSON: `json` names the line.
        jsonl.loads(raw.decode("utf-8", errors="replace"), path, FormatError)
        raise FormatError(f"{path}: not valid JSON ({e})") from None
    images = {}
    for i, image in enumerate(parsed.images):
        with errors.reraised(FormatError, msgspec.ValidationError, f"{path}: images[{i}]: "):
            captions = [" ".join(s.tokens) for s in _SENTENCES.decode(image.sentences)]
        images[image.cocoid] = (image.split, os.path.join(image.filepath, image.filename),
                                captions)
    return images


def check_translation(where, line, required=_MT_FIELDS):
    """Slow check of a line msgspec rejected: a `TranslationLine`, or FormatError at `where`."""
    if (row := jsonl.parse_line(line, where)) is None:
        return None
    if not all(isinstance(row.get(k), str) for k in required):
        raise FormatError(f"{where}: expected an object with string fields "
                          f"{', '.join(required)}")
    return TranslationLine(**{k: row[k] for k in TranslationLine.__struct_fields__ if k in row})


def open_translations(path, required=_MT_FIELDS):
    """A `jsonl.LineStream` over a translation file, its lines checked for `required` fields."""
    return jsonl.LineStream(path, TRANSLATION_DECODER,
                            functools.partial(check_translation, required=required))


def split_captions(images, split, langs, stream, stats):
    """Yields (lang, cocoid, caption index n, caption) of the images of `split` in `langs`:
    English from the Karpathy `images` (`read_karpathy`), the others from the translation
    `stream` (a LineStream; None without them). Lines naming another image count in `stats`."""
    wanted = {cid for cid, (s, _, _) in images.items() if s in SPLITS[split]}
    if "en" in langs:
        for cid in sorted(wanted):
            for n, caption in enumerate(images[cid][2]):
                yield "en", cid, n, caption
    translated = set(langs) - {"en"}
    for lineno, row in stream or ():
        if row.trg_lang not in translated:
            continue
        if not isinstance(row.image_id, str):
            raise FormatError(f"{stream.path}:{lineno}: expected an object with string fields "
                              f"{', '.join(_MT_FIELDS)}")
        cocoid, sep, n = row.image_id.partition("_")
        if not (sep and cocoid.isdigit() and n.isdigit() and cocoid.isascii() and n.isascii()):
            raise FormatError(f"{stream.path}:{lineno}: image_id {row.image_id!r} is not "
                              f"'<cocoid>_<caption index>'")
        if (cid := int(cocoid)) in wanted:
            yield row.trg_lang, cid, int(n), row.translation_tokenized
        elif cid in images:
            stats.wrong_split += 1
        else:
            stats.unknown_image += 1


def karpathy_path(manual_dir):
    """The Karpathy split file of `manual_dir`, or an error saying where it comes from."""
    path = find_file(manual_dir, KARPATHY_FILE, "Karpathy split file",
                     "http://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip")
    if path.endswith((".bz2", ".gz")):
        raise FormatError(f"{path}: decompress it to {KARPATHY_FILE}")
    return path


def translations_path(manual_dir, split):
    """The translation file of a split, or FileNotFoundError saying where it comes from."""
    return find_file(manual_dir, f"coco_mt_{split}.jsonl", f"COCO-35L {split} translations",
                     f"https://storage.googleapis.com/crossmodal-3600/coco_mt_{split}.jsonl.bz2")


def image_root(manual_dir):
    """The folder holding train2014/ and val2014/, or FileNotFoundError saying where they go."""
    for root in (manual_dir, os.path.join(manual_dir, "images")):
        if any(os.path.isdir(os.path.join(root, d)) for d in ("train2014", "val2014")):
            return root
    raise FileNotFoundError(
        f"missing COCO 2014 images: expected folders {manual_dir}/train2014 and "
        f"{manual_dir}/val2014 (or under {manual_dir}/images/); get train2014.zip and "
        f"val2014.zip from https://cocodataset.org/#download and unzip them there")


def read_split(manual_dir, split, langs, *, check_images=True):
    """Reads one split ("train" or "dev") for `langs` ("en": the Karpathy captions).
    Returns ({lang: [Example] by cocoid}, `ReadStats`, already logged); `check_images` drops and
    counts images without a file."""
    langs = languages.check_langs(langs, known=languages.TRAIN_35L_LANGS,
                                  what="COCO-35L language")
    images = read_karpathy(karpathy_path(manual_dir))
    root = image_root(manual_dir)
    stream = open_translations(translations_path(manual_dir, split)) if any(
        lang != "en" for lang in langs) else None
    stats = ReadStats()
    captions = {lang: collections.defaultdict(dict) for lang in langs}
    for lang, cid, n, text in split_captions(images, split, langs, stream, stats):
        captions[lang][cid][n] = text
    exists, examples = functools.cache(os.path.exists), {lang: [] for lang in langs}
    for lang in langs:
        for cid, refs in sorted(captions[lang].items()):
            path = os.path.join(root, images[cid][1])
            if check_images and not exists(path):
                stats.missing_image_file += 1
                continue
            examples[lang].append(Example(cid, path, tuple(refs[n] for n in sorted(refs))))
    stats.report(f"COCO-35L {split} ({manual_dir})")
    return examples, stats
