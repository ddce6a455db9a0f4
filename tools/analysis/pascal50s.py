"""PASCAL-50S as the CIDEr authors released it (Vedantam et al., CVPR 2015): a reader of both
public layouts.

The data comes in two layouts, MATLAB files whose struct fields are read by position (their
names differ between copies and are not documented):

- the dataset's release: `pair_pascal.mat` and `consensus_pascal.mat` (the triplets), with
  `pascal50S.mat` holding `train_sent_final` (optional here);
- the CIDEr authors' code repository (its data/ folder, read there when the folder given is
  the repository's): `pair_pascal.mat` with the pairwise votes (`result`), `pascal50S.mat`
  holding `refs`, and `pascal_cands.mat` (optional).

Their variables:

- `pascal50S.mat`: `train_sent_final` or `refs`, a 1 x 1000 struct array, one element per
  image: its name (the image's URL or file name, `.../2008_000032.jpg`) and a 1 x 50 cell of
  reference sentences;
- `pair_pascal.mat`, 4000 candidate pairs: `new_input`, a 1 x 4000 struct array of (image file
  name, candidate B, candidate C); `new_data`, 4000 x 2, the source of B and of C (1-5: one of
  five machine systems, 6: a human sentence of the image, 7: a human sentence of another
  image); `category`, 1 x 4000: the pair's kind, 1 HC (two human sentences of the image), 2 HI
  (one of the image and one of another image), 3 HM (human and machine), 4 MM (two machines),
  1000 pairs each; in the code repository's copy also `result`, a 1 x 4000 struct array whose
  one field holds the pair's human votes "which of B or C is better", 1 x 11 (1 x 10 for a
  few pairs), each 1 (B) or -1 (C);
- `pascal_cands.mat`: `cands`, a 1 x 4000 struct array of (image name, 1 x 2 cell of the
  pair's candidates B and C), the pairs again as candidates to score; checked against the
  pairs when it is there;
- `consensus_pascal.mat`, the triplet judgements: `triplets`, a 1 x (48 x 4000) struct array,
  the 48 triplets of each pair in pair order, each (reference A, candidate B, candidate C,
  winner), A, B and C each a 1 x 1 cell of text and the winner 1 (B is more like A) or -1 (C).
  The release stores each triplet's winner, the majority of its three judgements taken.

`read` gives one `Analysis` per source of human winners the folder has: the majority of each
pair's votes (`VOTES`: more 1s than -1s, B; fewer, C; as many, a human tie), with each
image's 50 sentences of `pascal50S.mat` as the references the metric draws from; and the
majority of each pair's triplets (`TRIPLETS`, tools/analysis/triplets.py), with each image's
triplet references (48: the image's 50 sentences less the two of its HC pair), checked
against `pascal50S.mat` when that file is there. Pairs, candidates and triplets that do not
match (a triplet of other candidates, a kind outside 1-4, a vote or winner other than +-1)
are errors naming the file and the entry.
"""

import collections
import dataclasses
import os

import numpy as np
from scipy import io as scipy_io

from tools.analysis import pairwise
from tools.analysis import triplets as triplets_lib
from tools.analysis.meta_scores import MetaError

REFERENCES_FILE = "pascal50S.mat"
REFERENCES_VARIABLES = ("train_sent_final", "refs")  # the dataset's, the code repository's
CANDIDATES_FILE = "pascal_cands.mat"
PAIRS_FILE = "pair_pascal.mat"
VOTES_FILE = "consensus_pascal.mat"
KINDS = {1: "HC", 2: "HI", 3: "HM", 4: "MM"}
SOURCES = {**{k: "machine" for k in range(1, 6)}, 6: "human", 7: "human (other image)"}
VOTES = "majority of pairwise votes"
TRIPLETS = "majority of triplets"


@dataclasses.dataclass(frozen=True)
class Analysis:
    """One source of human winners and the references that go with it.

    Attributes:
        target: VOTES or TRIPLETS.
        pairs: [pairwise.Pair] with their human winners, in pair order.
        references: {image: [references the metric draws from]}.
    """
    target: str
    pairs: list
    references: dict


@dataclasses.dataclass(frozen=True)
class Release:
    """PASCAL-50S read.

    Attributes:
        analyses: [Analysis]: the pairwise votes' where the folder has them, then the
            triplets' where it has those.
        triplets: [triplets.Triplet], 48 per pair, in pair order; None without
            consensus_pascal.mat.
        sentences: {image: [its 50 sentences]} from pascal50S.mat, or None without it.
        note: what was read and checked, for reports.
    """
    analyses: list
    triplets: list | None
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
    """pascal50S.mat (`train_sent_final` or `refs`): {image key: [its sentences]}."""
    mat = _load(path, [])
    names = [v for v in REFERENCES_VARIABLES if v in mat]
    if not names:
        found = sorted(k for k in mat if not k.startswith("__"))
        raise MetaError(f"{path}: no variable {' or '.join(REFERENCES_VARIABLES)} (found: "
                        f"{', '.join(found) or 'none'})")
    entries = mat[names[0]]
    out = {}
    for i, element in enumerate(entries.flat):
        where = f"{path}: {names[0]}({i + 1})"
        name, sentences = _fields(element, 2, where)
        cell = sentences if isinstance(sentences, np.ndarray) else np.array([sentences])
        out[_image_key(_text(name, where))] = [
            _text(s, f"{where}, sentence {k + 1}") for k, s in enumerate(cell.flat)]
    if not out:
        raise MetaError(f"{path}: no images")
    return out


def read_pairs(path):
    """pair_pascal.mat: ([(image key, B, C, kind)], each pair's votes or None without
    `result`)."""
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
    return out, _read_pair_votes(mat, path, len(out)) if "result" in mat else None


def _read_pair_votes(mat, path, count):
    """`result`: each pair's votes, a list of +1 (B) / -1 (C) per pair."""
    entries = mat["result"]
    if entries.size != count:
        raise MetaError(f"{path}: {count} pairs in new_input but {entries.size} in result")
    out = []
    for i, element in enumerate(entries.flat):
        where = f"{path}: result of pair {i + 1}"
        values = np.asarray(_fields(element, 1, where)[0]).ravel()
        if values.size == 0 or not np.isin(values, (1, -1)).all():
            raise MetaError(f"{where}: votes {values.tolist()!r} are not each 1 (B) or -1 (C)")
        out.append(values.astype(int).tolist())
    return out


def check_candidates(path, pairs):
    """pascal_cands.mat: each entry the image and the two candidates of the same pair."""
    entries = _load(path, ["cands"])["cands"]
    if entries.size != len(pairs):
        raise MetaError(f"{path}: {entries.size} entries for {len(pairs)} pairs")
    for i, (element, (image, b, c, _)) in enumerate(zip(entries.flat, pairs, strict=True)):
        where = f"{path}: cands({i + 1})"
        name, sentences = _fields(element, 2, where)
        cell = sentences if isinstance(sentences, np.ndarray) else np.array([sentences])
        texts = [_text(t, where) for t in cell.flat]
        if _image_key(_text(name, where)) != image or len(texts) != 2 or not (
                _same(texts[0], b) and _same(texts[1], c)):
            raise MetaError(f"{where}: not the image and candidates of pair {i + 1} in "
                            f"{PAIRS_FILE} ({image}: {b[:40]!r} / {c[:40]!r})")


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
                                        None, where, t // per_pair))
    return out


def _vote_pairs(pairs, votes, where, lang):
    """The pairs with the majority of their votes as the human winner (a tie: 0)."""
    return [pairwise.Pair(image, lang, b, c, int(np.sign(sum(v))), f"{where}: pair {i + 1}",
                          kind)
            for i, ((image, b, c, kind), v) in enumerate(zip(pairs, votes, strict=True))]


def _triplet_analysis(folder, pairs, lang):
    """The triplets, their pairs' winners and the images' triplet references."""
    triplets = read_votes(os.path.join(folder, VOTES_FILE), pairs)
    scored, _ = triplets_lib.pairs_from_triplets(triplets, lang)
    # The references of an image: the A's of its first pair's triplets, in order (a sentence
    # written twice for an image stays twice, as in the release).
    references = {}
    for t in triplets:
        if t.image not in references or references[t.image][0] == (t.a, t.b):
            references.setdefault(t.image, [(t.a, t.b), []])[1].append(t.reference)
    references = {image: refs for image, (_, refs) in references.items()}
    return triplets, Analysis(TRIPLETS, scored, references)


def _sentences_note(sentences, references):
    """How many triplet references are among the images' sentences of pascal50S.mat."""
    missing = sorted(image for image in references if image not in sentences)
    if missing:
        raise MetaError(f"{REFERENCES_FILE}: no sentences for image {missing[0]!r} "
                        f"({len(missing)} images of the pairs are not there)")
    known = {image: {_normalized(s) for s in sentences[image]} for image in references}
    outside = sum(_normalized(r) not in known[image]
                  for image, refs in references.items() for r in refs)
    total = sum(len(refs) for refs in references.values())
    return f"{total - outside} of {total} among the image's sentences in {REFERENCES_FILE}"


def read(folder, lang="en"):
    """Reads PASCAL-50S from a folder in either layout (the module docstring).

    Returns:
        A `Release`.

    Raises:
        MetaError: a missing file or variable, a malformed entry, candidates or triplets that
            do not match their pairs (file and entry named).
    """
    notes = []
    if not os.path.isdir(folder):
        raise MetaError(f"PASCAL-50S folder not found: {folder}" if not os.path.exists(folder)
                        else f"PASCAL-50S: {folder} is not a folder")
    data = os.path.join(folder, "data")
    if not os.path.isfile(os.path.join(folder, PAIRS_FILE)):
        if not os.path.isfile(os.path.join(data, PAIRS_FILE)):
            raise MetaError(
                f"PASCAL-50S: no {PAIRS_FILE} in {folder}" + (
                    f" nor in {data}" if os.path.isdir(data) else "")
                + f"; give the folder of the dataset's release ({PAIRS_FILE}, {VOTES_FILE}) "
                f"or of the CIDEr code repository ({PAIRS_FILE}, {REFERENCES_FILE} in its "
                f"data/, read from the repository's folder too)")
        folder = data  # the code repository's top folder
        notes.append(f"read from {folder}")
    pairs_path = os.path.join(folder, PAIRS_FILE)
    pairs, votes = read_pairs(pairs_path)
    has_triplets = os.path.isfile(os.path.join(folder, VOTES_FILE))
    if votes is None and not has_triplets:
        raise MetaError(f"{folder}: no human judgements: PASCAL-50S needs {VOTES_FILE} (the "
                        f"dataset's triplets) or a {PAIRS_FILE} with 'result' (the pairwise "
                        f"votes of the CIDEr code repository)")
    sentences_path = os.path.join(folder, REFERENCES_FILE)
    sentences = read_sentences(sentences_path) if os.path.isfile(sentences_path) else None
    analyses, triplets = [], None
    notes.append(f"{len(pairs)} pairs")
    if votes is not None:
        if sentences is None:
            raise MetaError(f"{sentences_path} not found: the pairwise votes of {PAIRS_FILE} "
                            f"are scored against each image's sentences there")
        missing = sorted({image for image, *_ in pairs} - set(sentences))
        if missing:
            raise MetaError(f"{sentences_path}: no sentences for image {missing[0]!r} "
                            f"({len(missing)} images of the pairs are not there)")
        if os.path.isfile(os.path.join(folder, CANDIDATES_FILE)):
            check_candidates(os.path.join(folder, CANDIDATES_FILE), pairs)
            notes.append(f"{CANDIDATES_FILE} matches them")
        scored = _vote_pairs(pairs, votes, pairs_path, lang)
        if pairwise.repeats(scored):
            notes.append(f"{VOTES}: {pairwise.repeats(scored)}")
        sizes = sorted(collections.Counter(map(len, votes)).items(), reverse=True)
        notes.append(f"{VOTES}: {', '.join(f'{n} pairs of {k}' for k, n in sizes)} votes, "
                     f"{sum(p.human == 0 for p in scored)} ties; references: each image's "
                     f"{'/'.join(str(n) for n in sorted({len(v) for v in sentences.values()}))}"
                     f" sentences of {REFERENCES_FILE}")
        analyses.append(Analysis(VOTES, scored, {image: sentences[image]
                                                 for image, *_ in pairs}))
    if has_triplets:
        triplets, analysis = _triplet_analysis(folder, pairs, lang)
        analyses.append(analysis)
        repeats = pairwise.repeats(analysis.pairs)
        notes.append(f"{TRIPLETS}: {len(triplets) // len(pairs)} triplets each"
                     + (f", {repeats}" if repeats else "") + "; references: each image's "
                     "triplet references"
                     + (f", {_sentences_note(sentences, analysis.references)}"
                        if sentences is not None else ""))
    return Release(analyses, triplets, sentences, "; ".join(notes))
