"""`VifidelScorer`: an image set's labels (and references) prepared once, captions per call.

The constructor turns every image's labels into a bag of unit vectors and, with references,
the references into their content-word matrices and the labels' importance penalties; each
`score(captions)` call then only normalizes the new captions, looks their words up and solves
one small transport problem per image (tools/vifidel/wmd.py).
"""

import dataclasses

import numpy as np

from errors import InputError
from tools.vifidel import bags, wmd
from tools.vifidel import stopwords as stop_lists


@dataclasses.dataclass(frozen=True)
class VifidelResult:
    """Scores of one call.

    Attributes:
        corpus: mean VIFIDEL over the scored images that have a known label.
        per_image: float64 [images]; NaN for an image none of whose labels the vectors know.
        wmd: float64 [images], the distances (inf for a caption without content words).
        num_empty: captions without any known content word (scored 0).
        oov: {"captions": ..., "labels": ..., "references": ...}, each `OovCounts.as_dict()`.
    """
    corpus: float
    per_image: np.ndarray
    wmd: np.ndarray
    num_empty: int
    oov: dict


class VifidelScorer:
    """VIFIDEL of captions of one language against an image set's labels.

    Args:
        labels: per image, {label name: weight} (e.g. `labels.read_labels` values).
        lang: the captions' language.
        vectors: the `WordVectors` of `lang`.
        label_vectors: the `WordVectors` of the label language (default `vectors`); both must
            be in one space (aligned vectors), so that English labels meet captions in any
            language.
        label_lang: the language of the label names.
        references: per image, a list of reference captions in `lang` for the importance
            penalty of Eq. 4, or None for the plain metric.
        stopwords: vector keys of `lang` to drop from captions and references; None (the
            default) drops the function words of `lang` (stopwords.DEFAULT, as `Settings`
            and the command line do), an empty set none.
        label_stopwords: vector keys of `label_lang` to drop inside multi-word labels; None:
            its function words.
        multiword: "mean" or "split" (tools/vifidel/bags.py).
        penalty: the importance penalty, "halved" (Eq. 4) or "clipped" (tools/vifidel/wmd.py).
        cost_power: the cost's exponent p, 2 (Eq. 1) or 1 (the authors' script).

    Raises:
        InputError: the vectors differ in dimension, the references do not match the images,
            or no image has a label the vectors know.
    """

    def __init__(self, labels, lang, vectors, *, label_vectors=None, label_lang="en",
                 references=None, stopwords=None, label_stopwords=None,
                 multiword="mean", penalty="halved", cost_power=2):
        if penalty not in wmd.PENALTIES:
            raise InputError(f"unknown penalty {penalty!r}; known: {', '.join(wmd.PENALTIES)}")
        if cost_power not in wmd.COST_POWERS:
            raise InputError(f"cost power must be 1 or 2, got {cost_power!r}")
        label_vectors = label_vectors or vectors
        if label_vectors.dim != vectors.dim:
            raise InputError(f"the label vectors ({label_vectors.path}, {label_vectors.dim}) "
                             f"and the {lang!r} vectors ({vectors.path}, {vectors.dim}) are "
                             f"not one space: their dimensions differ")
        if references is not None and len(references) != len(labels):
            raise InputError(f"{len(references)} reference lists for {len(labels)} images")
        self.lang = lang
        self.vectors = vectors
        self.penalty = penalty
        self.cost_power = cost_power
        if stopwords is None:
            stopwords = stop_lists.load(stop_lists.DEFAULT, lang).keys
        if label_stopwords is None:
            label_stopwords = stop_lists.load(stop_lists.DEFAULT, label_lang).keys
        self.stopwords = frozenset(stopwords)
        label_maker = bags.BagMaker(label_vectors, label_lang, label_stopwords)
        self._labels = []
        for image_labels in labels:
            bag = label_maker.label_bag(image_labels, multiword)
            units = list(bag)
            self._labels.append((np.array([bag[u] for u in units], np.float64),
                                 bags.unit_matrix(units, label_vectors)) if units else None)
        self.num_unlabelled = sum(entry is None for entry in self._labels)
        if self.num_unlabelled == len(self._labels):
            raise InputError(f"none of the {len(self._labels)} images has a label that the "
                             f"{label_lang!r} vectors ({label_vectors.path}) know")
        self.oov_labels = label_maker.oov
        self.oov_references = bags.OovCounts()
        self._references = None
        self._rho_labels = None
        if references is not None:
            maker = bags.BagMaker(vectors, lang, self.stopwords)
            self._references = [[bags.unit_matrix(list(bag), vectors)
                                 for bag in maker.caption_bags(refs) if bag]
                                for refs in references]
            self._rho_labels = [None if entry is None else wmd.importance(entry[1], refs, penalty)
                                for entry, refs in zip(self._labels, self._references,
                                                       strict=True)]
            self.oov_references = maker.oov

    @property
    def num_images(self):
        return len(self._labels)

    def score(self, captions, indices=None):
        """Scores one caption per image.

        Args:
            captions: caption strings, one per image (or per entry of `indices`).
            indices: the images the captions belong to (default: all, in order).

        Returns:
            A `VifidelResult`.
        """
        indices = range(self.num_images) if indices is None else list(indices)
        captions = list(captions)
        if len(captions) != len(indices):
            raise ValueError(f"{len(captions)} captions for {len(indices)} images")
        maker = bags.BagMaker(self.vectors, self.lang, self.stopwords)
        per_image = np.full(len(captions), np.nan)
        distances = np.full(len(captions), np.inf)
        num_empty = 0
        for n, (i, bag) in enumerate(zip(indices, maker.caption_bags(captions), strict=True)):
            if self._labels[i] is None:
                continue
            units = list(bag)
            num_empty += not units
            x = bags.unit_matrix(units, self.vectors)
            rho_caption = rho_labels = None
            if self._references is not None:
                rho_caption = wmd.importance(x, self._references[i], self.penalty)
                rho_labels = self._rho_labels[i]
            weights, x_labels = self._labels[i]
            per_image[n], distances[n] = wmd.vifidel(
                weights, x_labels, np.array([bag[u] for u in units], np.float64), x,
                rho_labels, rho_caption, self.cost_power)
        scored = per_image[~np.isnan(per_image)]
        return VifidelResult(
            corpus=float(scored.mean()) if scored.size else float("nan"),
            per_image=per_image, wmd=distances, num_empty=num_empty,
            oov={"captions": maker.oov.as_dict(), "labels": self.oov_labels.as_dict(),
                 "references": self.oov_references.as_dict()})
