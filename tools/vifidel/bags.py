"""Bags of vector-space units for VIFIDEL: a caption's words and an image's object labels.

Captions are normalized as CIDEr normalizes them (evaluation/cider/text.py). In ja, th and zh, whose
characters the normalization splits apart, runs of characters are joined back into the longest
words the vectors know (forward maximum matching over the vector vocabulary), so the words are
the vectors' own segmentation. Stop words, when a list is given, are dropped; tokens the
vectors do not know are counted (`OovCounts`) and dropped, never an error.

Labels (Open Images display names are English) are normalized in the label language. A
multi-word label ("Traffic light") is looked up whole first (vectors with phrase entries, such
as word2vec's "traffic_light", have the key "traffic light"); otherwise `multiword` decides:
"mean" (default) makes it one unit at the mean direction of its known words (one object, one
point of mass), "split" makes each known word a unit sharing the label's weight. Stop words
are dropped inside multi-word labels only.

A unit is a tuple of vector keys (one key for a word); a bag is {unit: weight}.
"""

import collections
import dataclasses

import numpy as np

from errors import InputError
from evaluation.cider import text

MULTIWORD = ("mean", "split")
# Longest run of ja/th/zh tokens joined into one word.
MAX_MATCH_TOKENS = 8
_EXAMPLES = 5


@dataclasses.dataclass
class OovCounts:
    """Tokens looked up and those the vectors do not know."""
    tokens: int = 0
    oov: int = 0
    examples: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def add(self, other):
        self.tokens += other.tokens
        self.oov += other.oov
        self.examples.update(other.examples)

    def as_dict(self):
        """{"tokens", "oov", "rate", "top": [most frequent unknown tokens]}."""
        return {"tokens": self.tokens, "oov": self.oov,
                "rate": self.oov / self.tokens if self.tokens else 0.0,
                "top": [t for t, _ in self.examples.most_common(_EXAMPLES)]}


def match(tokens, vectors, lang):
    """Tokens -> vector keys, joining ja/th/zh character runs into the longest known words.

    Returns:
        (keys, unknown): the known keys in order, and the tokens no key covers.
    """
    if lang not in text.SEGMENTED_LANGS:
        return [t for t in tokens if t in vectors], [t for t in tokens if t not in vectors]
    keys, unknown, i = [], [], 0
    longest = min(MAX_MATCH_TOKENS, vectors.max_key_tokens)
    while i < len(tokens):
        for j in range(min(len(tokens), i + longest), i, -1):
            key = " ".join(tokens[i:j])
            if key in vectors:
                keys.append(key)
                i = j
                break
        else:
            unknown.append(tokens[i])
            i += 1
    return keys, unknown


class BagMaker:
    """Turns captions and labels of one language into bags, counting unknown tokens.

    Args:
        vectors: the `WordVectors` of `lang`.
        lang: the language of the texts.
        stopwords: vector keys to drop.
    """

    def __init__(self, vectors, lang, stopwords=frozenset()):
        self.vectors = vectors
        self.lang = lang
        self.stopwords = frozenset(stopwords)
        self.oov = OovCounts()

    def _keys(self, tokens):
        keys, unknown = match(tokens, self.vectors, self.lang)
        self.oov.tokens += len(keys) + len(unknown)
        self.oov.oov += len(unknown)
        self.oov.examples.update(unknown)
        return keys

    def caption_bags(self, captions):
        """One bag per caption: {(key,): count} of its known content words."""
        tokens = text.normalize_batch(captions, self.lang).split()
        return [dict(collections.Counter((k,) for k in self._keys(t)
                                         if k not in self.stopwords)) for t in tokens]

    def label_bag(self, labels, multiword="mean"):
        """The bag of one image's labels.

        Args:
            labels: {label name: weight}.
            multiword: "mean" or "split" (module docstring).

        Returns:
            {unit: weight}; labels with no known word are left out (and counted).
        """
        if multiword not in MULTIWORD:
            raise InputError(f"unknown multiword handling {multiword!r}; known: "
                             f"{', '.join(MULTIWORD)}")
        names = list(labels)
        bag = collections.Counter()
        for name, tokens in zip(names, text.normalize_batch(names, self.lang).split(),
                                strict=True):
            whole = " ".join(tokens)
            if whole in self.vectors:
                self.oov.tokens += 1
                bag[(whole,)] += labels[name]
                continue
            keys = self._keys(tokens)
            if len(keys) > 1:
                keys = [k for k in keys if k not in self.stopwords] or keys
            if not keys:
                continue
            if multiword == "mean":
                bag[tuple(keys)] += labels[name]
            else:
                for key in keys:
                    bag[(key,)] += labels[name] / len(keys)
        return dict(bag)


def unit_matrix(units, vectors):
    """float64 [len(units), dim]: each unit's direction (the normalized mean of its keys)."""
    out = np.zeros((len(units), vectors.dim))
    for i, unit in enumerate(units):
        mean = vectors.rows(list(unit)).mean(axis=0)
        out[i] = mean / max(np.linalg.norm(mean), 1e-12)
    return out
