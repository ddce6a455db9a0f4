"""PASCAL-50S as the CIDEr authors released it (Vedantam et al., CVPR 2015): a reader.

The release (the CIDEr project's data, MATLAB files) holds three files; their variables, as
the public code that reads them uses them (the struct fields are read by position: their names
are not documented):

- `pascal50S.mat`, variable `train_sent_final`: a 1 x 1000 struct array, one element per
  image: its name (the image's URL or file name, `.../2008_000032.jpg`) and a 1 x 50 cell of
  reference sentences;
- `pair_pascal.mat`, 4000 candidate pairs: `new_input`, a 1 x 4000 struct array of (image file
  name, candidate B, candidate C); `new_data`, 4000 x 2, the source of B and of C (1-5: one of
  five machine systems, 6: a human sentence of the image, 7: a human sentence of another
  image); `category`, 1 x 4000: the pair's kind, 1 HC (two human sentences of the image), 2 HI
  (one of the image and one of another image), 3 HM (human and machine), 4 MM (two machines),
  1000 pairs each;
- `consensus_pascal.mat`, the human votes: `triplets`, a 1 x (48 x 4000) struct array, the 48
  triplets of each pair in pair order, each (reference A, candidate B, candidate C, winner),
  A, B and C each a 1 x 1 cell of text and the winner 1 (B is more like A) or -1 (C). The
  release stores each triplet's winner, the majority of its three judgements already taken.

`read` turns them into triplets (tools/analysis/triplets.py), whose majorities give each
pair's winner; the references the metric draws from are each image's triplet references (48:
the image's 50 sentences less the two of its HC pair), checked against `pascal50S.mat` when
that file is there. Pairs and triplets that do not match (a triplet of other candidates, a kind
outside 1-4, a winner other than +-1) are errors naming the pair and the triplet.
"""

import dataclasses
import os

import numpy as np
from scipy import io as scipy_io

from tools.analysis import triplets as triplets_lib
from tools.analysis.meta_scores import MetaError

REFERENCES_FILE = "pascal50S.mat"
PAIRS_FILE = "pair_pascal.mat"
VOTES_FILE = "consensus_pascal.mat"
KINDS = {1: "HC", 2: "HI", 3: "HM", 4: "MM"}
SOURCES = {**{k: "machine" for k in range(1, 6)}, 6: "human", 7: "human (other image)"}


@dataclasses.dataclass(frozen=True)
class Release:
    """PASCAL-50S read.

    Attributes:
        triplets: [triplets.Triplet], 48 per pair, in pair order.
        pairs: [pairwise.Pair] with their winners by the majority of their triplets.
        references: {image: [its triplet references]}.
        sentences: {image: [its 50 sentences]} from pascal50S.mat, or None without it.
        note: what was checked, for reports.
    """
    triplets: list
    pairs: list
    references: dict
    sentences: dict | None
    note: str


def _load(path, variables):
    if not os.path.isfile(path):
        raise MetaError(f"PASCAL-50S file not found: {path}")
    try:
        mat = scipy_io.loadmat(path)
    except (ValueError, TypeError, OSError) as e:
        raise MetaError(f"{path}: not a MATLAB file scipy can read ({e})") from None
    missing = [v for v in variables if v not in mat]
    if missing:
        found = sorted(k for k in mat if not k.startswith("__"))
        raise MetaError(f"{path}: no variable {', '.join(missing)} (found: "
                        f"{', '.join(found) or 'none'})")
    return mat


def _text(value, where):
    """The text inside a char array, possibly wrapped in 1 x 1 cells."""
    while isinstance(value, np.ndarray):
        if value.size != 1:
            raise MetaError(f"{where}: expected one text, found an array of {value.size}")
        value = value.flat[0]
    if not isinstance(value, str):
        raise MetaError(f"{where}: expected text, found {type(value).__name__}")
    return value.strip()


def _fields(element, count, where):
    """The values of a struct element (or of a cell holding them), by position."""
    if isinstance(element, np.void) and element.dtype.names:
        values = [element[k] for k in range(len(element.dtype.names))]
    elif isinstance(element, np.ndarray) and element.dtype == object:
        values = list(element.flat)
    else:
        raise MetaError(f"{where}: expected a struct of {count} fields")
    if len(values) != count:
        raise MetaError(f"{where}: expected {count} fields, found {len(values)}")
    return values


def _image_key(name):
    return os.path.splitext(os.path.basename(name.replace("\\", "/")))[0]


def _normalized(text):
    return " ".join(text.split()).lower()


def _same(a, b):
    return _normalized(a) == _normalized(b)


def read_sentences(path):
    """pascal50S.mat: {image key: [its sentences]}."""
    entries = _load(path, ["train_sent_final"])["train_sent_final"]
    out = {}
    for i, element in enumerate(entries.flat):
        where = f"{path}: train_sent_final({i + 1})"
        name, sentences = _fields(element, 2, where)
        cell = sentences if isinstance(sentences, np.ndarray) else np.array([sentences])
        out[_image_key(_text(name, where))] = [
            _text(s, f"{where}, sentence {k + 1}") for k, s in enumerate(cell.flat)]
    if not out:
        raise MetaError(f"{path}: no images")
    return out


def read_pairs(path):
    """pair_pascal.mat: [(image key, B, C, kind)]."""
    mat = _load(path, ["new_input", "category"])
    entries, kinds = mat["new_input"], np.asarray(mat["category"]).ravel()
    if entries.size != kinds.size:
        raise MetaError(f"{path}: {entries.size} pairs in new_input but {kinds.size} "
                        f"categories")
    out = []
    for i, (element, kind) in enumerate(zip(entries.flat, kinds.tolist(), strict=True)):
        where = f"{path}: pair {i + 1}"
        image, b, c = (_text(v, where) for v in _fields(element, 3, where))
        if kind not in KINDS:
            raise MetaError(f"{where}: category {kind:g} is not 1-4 (HC, HI, HM, MM)")
        out.append((_image_key(image), b, c, KINDS[int(kind)]))
    return out


def read_votes(path, pairs):
    """consensus_pascal.mat: the triplets of each pair, checked against the pairs."""
    entries = _load(path, ["triplets"])["triplets"]
    if not pairs or entries.size % len(pairs):
        raise MetaError(f"{path}: {entries.size} triplets for {len(pairs)} pairs (expected the "
                        f"same number per pair)")
    per_pair = entries.size // len(pairs)
    out = []
    for t, element in enumerate(entries.flat):
        where = f"{path}: triplet {t + 1} (pair {t // per_pair + 1})"
        a_ref, b, c, winner = _fields(element, 4, where)
        reference, b, c = (_text(v, where) for v in (a_ref, b, c))
        image, pair_b, pair_c, kind = pairs[t // per_pair]
        if not (_same(b, pair_b) and _same(c, pair_c)):
            raise MetaError(f"{where}: its candidates {b[:40]!r} / {c[:40]!r} are not the "
                            f"pair's {pair_b[:40]!r} / {pair_c[:40]!r}")
        value = np.asarray(winner).ravel()
        if value.size != 1 or value[0] not in (1, -1):
            raise MetaError(f"{where}: winner {value.tolist()!r} is not 1 (B) or -1 (C)")
        out.append(triplets_lib.Triplet(image, reference, pair_b, pair_c, int(value[0]), kind,
                                        None, where))
    return out


def read(folder, lang="en"):
    """Reads the release from a folder holding its files (pascal50S.mat optional).

    Returns:
        A `Release`.

    Raises:
        MetaError: a missing file or variable, a malformed entry, triplets that do not match
            their pairs (file and entry named).
    """
    pairs = read_pairs(os.path.join(folder, PAIRS_FILE))
    triplets = read_votes(os.path.join(folder, VOTES_FILE), pairs)
    scored, _ = triplets_lib.pairs_from_triplets(triplets, lang)
    # The references of an image: the A's of its first pair's triplets, in order (a sentence
    # written twice for an image stays twice, as in the release).
    references = {}
    for t in triplets:
        if t.image not in references or references[t.image][0] == (t.a, t.b):
            references.setdefault(t.image, [(t.a, t.b), []])[1].append(t.reference)
    references = {image: refs for image, (_, refs) in references.items()}
    if len(scored) != len(pairs):
        raise MetaError(f"{os.path.join(folder, PAIRS_FILE)}: {len(pairs)} pairs, of which "
                        f"{len(pairs) - len(scored)} repeat another pair of their image")
    sentences_path = os.path.join(folder, REFERENCES_FILE)
    sentences = None
    note = (f"{len(scored)} pairs, {len(triplets) // len(scored)} triplets each; references: "
            f"each image's triplet references")
    if os.path.isfile(sentences_path):
        sentences = read_sentences(sentences_path)
        missing = sorted(image for image in references if image not in sentences)
        if missing:
            raise MetaError(f"{sentences_path}: no sentences for image {missing[0]!r} "
                            f"({len(missing)} images of the pairs are not there)")
        known = {image: {_normalized(s) for s in sentences[image]} for image in references}
        outside = sum(_normalized(r) not in known[image]
                      for image, refs in references.items() for r in refs)
        total = sum(len(refs) for refs in references.values())
        note += (f", {total - outside} of {total} among the image's sentences in "
                 f"{REFERENCES_FILE}")
    return Release(triplets, scored, references, sentences, note)
