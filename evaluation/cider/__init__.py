"""The CIDEr engine: CIDEr-D and CIDEr for 36 languages, exact to pycocoevalcap, JAX-compiled.

Parts, in the order the data flows:

| module | what it does |
| --- | --- |
| `text` | multilingual normalization: NFKC, lowercase, punctuation, zh/ja/th segmentation |
| `ngram_index` | exact integer ids for tokens and n-grams, hash tables over them |
| `ngram_match` | the compiled (numba) loops: interning tokens, matching a prediction's n-grams |
| `kernel` | the jit-compiled JAX kernel: cosines, length penalties, per-image means |
| `df` | document frequencies and their files |
| `scorer` | `CiderScorer`: references prepared once, `score(predictions)` per call |
| `per_language` | predictions scored against an XM3600 `captions.jsonl`, language by language |
| `__main__` | the command line, `python -m evaluation.cider` |

The names below are the Python API (docs/cider.md); prediction files are read with
`formats.predictions.read`, and bad input is an `errors.InputError`.
"""

from evaluation.cider.df import (
    MAX_N,
    DocumentFrequency,
    load_document_frequencies,
    save_document_frequencies,
)
from evaluation.cider.per_language import REFERENCE_FIELDS, LanguageScore, score_languages
from evaluation.cider.scorer import (
    METRICS,
    SIGMA,
    CiderResult,
    CiderScorer,
    map_languages,
    num_cores,
)

__all__ = [
    "MAX_N", "METRICS", "REFERENCE_FIELDS", "SIGMA", "CiderResult", "CiderScorer",
    "DocumentFrequency", "LanguageScore", "load_document_frequencies", "map_languages",
    "num_cores", "save_document_frequencies", "score_languages",
]
