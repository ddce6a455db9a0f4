"""The CIDEr engine: CIDEr-D and CIDEr for 36 languages, exact to pycocoevalcap, JAX-compiled.

Parts, in the order the data flows:

| module | what it does |
| --- | --- |
| `text` | multilingual normalization: NFKC, lowercase, punctuation, zh/ja/th segmentation |
| `ngram_index` | exact integer ids for tokens and n-grams, hash tables over them |
| `ngram_match` | the compiled (numba) loops: interning tokens, matching a prediction's n-grams |
| `kernel` | the jit-compiled JAX kernel: cosines, length penalties, per-image means |
| `df` | document frequencies and their files; `InputError` |
| `scorer` | `CiderScorer`: references prepared once, `score(predictions)` per call |
| `corpus` | prediction files scored against an XM3600 `captions.jsonl`, language by language |
| `__main__` | the command line, `python -m evaluation.cider` |

The names below are the Python API (README, "Evaluation: CIDEr").
"""

from evaluation.cider.corpus import (
    REFERENCE_FIELDS,
    LanguageScore,
    Predictions,
    read_predictions,
    score_languages,
)
from evaluation.cider.df import (
    MAX_N,
    DocumentFrequency,
    InputError,
    load_document_frequencies,
    save_document_frequencies,
)
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
    "DocumentFrequency", "InputError", "LanguageScore", "Predictions", "load_document_frequencies",
    "map_languages", "num_cores", "read_predictions", "save_document_frequencies",
    "score_languages",
]
