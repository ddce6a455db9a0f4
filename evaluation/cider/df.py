"""Document frequencies of CIDEr n-grams: the `DocumentFrequency` record and its JSON file."""

import dataclasses
import json

import files
import formats
from data import jsonl
from errors import InputError

MAX_N = 4
_DF_FORMAT = "cider-document-frequency"


@dataclasses.dataclass(frozen=True)
class DocumentFrequency:
    """One language's reference n-gram document frequencies over `num_images` images.
    `counts`: n-gram (tokens joined by a space) -> images; `normalization`: of the tokens."""
    lang: str
    num_images: int
    counts: dict
    normalization: str

    def save(self, path):
        """Writes a JSON file holding this language (see `save_document_frequencies`)."""
        save_document_frequencies(path, [self])

    @classmethod
    def load(cls, path, lang=None):
        """One language (`lang` may be left out if the file holds one) of a saved file."""
        dfs = load_document_frequencies(path)
        if lang is None:
            if len(dfs) != 1:
                raise InputError(f"{path}: holds {', '.join(dfs)}; say which language to load")
            return next(iter(dfs.values()))
        if lang not in dfs:
            raise InputError(f"{path}: no document frequencies for {lang!r} (it has "
                             f"{', '.join(dfs)})")
        return dfs[lang]


def save_document_frequencies(path, dfs):
    """Writes several languages' document frequencies to one JSON file (docs/cider.md)."""
    payload = {"format": _DF_FORMAT, "version": 1, "languages": {
        df.lang: {"num_images": df.num_images, "normalization": df.normalization,
                  "df": df.counts} for df in dfs}}
    with files.replacing(path) as f:
        json.dump(payload, f, ensure_ascii=False)


def _parse_df_entry(path, lang, entry):
    where = f"{path}: language {lang!r}"
    if not isinstance(entry, dict) or set(entry) != {"num_images", "normalization", "df"}:
        raise InputError(f"{where}: expected keys num_images, normalization, df")
    num_images = entry["num_images"]
    if not isinstance(num_images, int) or isinstance(num_images, bool) or num_images < 1:
        raise InputError(f"{where}: num_images must be a positive integer, got {num_images!r}")
    if not isinstance(entry["df"], dict) or not isinstance(entry["normalization"], str):
        raise InputError(f"{where}: df must be an object and normalization a string")
    for ngram, count in entry["df"].items():
        tokens = ngram.split(" ")
        if not 1 <= len(tokens) <= MAX_N or not all(tokens) or ngram != " ".join(ngram.split()):
            raise InputError(f"{where}: n-gram {ngram!r} is not 1-{MAX_N} tokens joined by "
                             f"single spaces")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= num_images:
            raise InputError(f"{where}: n-gram {ngram!r} has count {count!r}, expected an "
                             f"integer in 1..{num_images}")
    return DocumentFrequency(lang, num_images, entry["df"], entry["normalization"])


def load_document_frequencies(path):
    """Reads a file written by `save_document_frequencies`; returns {lang: DocumentFrequency}."""
    text = formats.read_text(path, InputError, "document frequency file",
                             "not UTF-8 ({}); not a document frequency file")
    payload = jsonl.loads(text, path, InputError)
    if not isinstance(payload, dict) or payload.get("format") != _DF_FORMAT:
        raise InputError(f"{path}: not a document frequency file (no \"format\": "
                         f"\"{_DF_FORMAT}\")")
    if payload.get("version") != 1 or not isinstance(payload.get("languages"), dict):
        raise InputError(f"{path}: unsupported version {payload.get('version')!r} or no "
                         f"\"languages\" object")
    return {lang: _parse_df_entry(path, lang, entry)
            for lang, entry in payload["languages"].items()}
