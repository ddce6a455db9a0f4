"""The CIDEr engine: CIDEr-D and CIDEr for 36 languages, exact to pycocoevalcap, JAX-compiled.

The names below are the Python API (docs/cider.md); bad input is an `errors.InputError`.
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
