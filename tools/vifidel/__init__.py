"""VIFIDEL (Madhyastha, Wang and Specia, ACL 2019), multilingual: the visual fidelity of a
caption as exp(-WMD) between the image's object labels and the caption's words.

Parts, in the order the data flows:

| module | what it does |
| --- | --- |
| `labels` | Open Images label CSVs (image-level, boxes), class descriptions, JSONL labels |
| `vectors` | word2vec text / binary and fastText `.vec` files, read once, cached, memory-mapped |
| `stopwords` | the stop words of each language (UD function words, stopwordsiso, none, a folder) |
| `bags` | captions and labels as bags of vector keys (ja/th/zh word matching, stop words, OOV) |
| `wmd` | Eqs. 1-5: the cost (p = 2 or 1), the penalty of Eq. 4, the transport (POT), the score |
| `scorer` | `VifidelScorer`: labels and references prepared once, `score(captions)` per call |
| `corpus` | `Settings` (defaults: the paper's), per-language scorers, the own-vs-other control |
| `options` | the settings as command-line options, shared with the meta-evaluation |
| `__main__` | the command line, `python -m tools.vifidel` |

English labels meet captions in any language because the vectors of all languages share one
space (aligned vectors such as fastText's `wiki.<lang>.align.vec`). Bad input (label, vector
and stop-word files, settings) is an `errors.InputError` naming the file, line or value.
"""

from tools.vifidel.bags import MULTIWORD, OovCounts
from tools.vifidel.corpus import (
    LanguageVifidel,
    Settings,
    build_scorers,
    ranking_control,
    score_languages,
)
from tools.vifidel.labels import read_class_descriptions, read_labels
from tools.vifidel.scorer import VifidelResult, VifidelScorer
from tools.vifidel.vectors import WordVectors, load_languages, load_vectors

__all__ = [
    "MULTIWORD", "LanguageVifidel", "OovCounts", "Settings", "VifidelResult",
    "VifidelScorer", "WordVectors", "build_scorers", "load_languages", "load_vectors",
    "ranking_control", "read_class_descriptions", "read_labels", "score_languages",
]
