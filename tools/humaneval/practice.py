"""The guidelines' examples and the practice items of a session: known answers, never results.

Both are drawn at create time from the release's own captions in each session language, so a
rater sees examples in the language they rate: a caption a person wrote for an image ("own")
and a caption of another image ("other"). They use images outside the rated subset where the
release has enough (else images of the subset; the captions they show are references, never a
model's). Per language:

- one guideline example: an image with its own caption and another image's caption;
- PRACTICE_ITEMS practice items with the answers they accept and why:
    sxs: own vs other (the own side better: any of its three points), identical captions
        (Similar), own vs other again on the other side;
    quality: own (Excellent or Good), other (Bad), own;
    thumb: other (precision 1-2), own (precision 4-5), other.

A practice answer is checked with the scale's own check (scales.check_answer), compared with
what the item accepts, stored apart from the ratings (store.add_practice) and answered with
feedback: right or not, the expected answer, and why.
"""

from errors import InputError
from tools.humaneval import scales

PRACTICE_ITEMS = 3
_PLANS = {  # per protocol: (kind, accepted answers, why key) of each practice item
    "sxs": (("own-left", {"choice": [-3, -2, -1]}, "why.own_vs_other"),
            ("identical", {"choice": [0]}, "why.identical"),
            ("own-right", {"choice": [1, 2, 3]}, "why.own_vs_other")),
    "quality": (("own", {"quality": ["Excellent", "Good"]}, "why.own"),
                ("other", {"quality": ["Bad"]}, "why.other"),
                ("own", {"quality": ["Excellent", "Good"]}, "why.own")),
    "thumb": (("other", {"P": [1, 2]}, "why.other"),
              ("own", {"P": [4, 5]}, "why.own"),
              ("other", {"P": [1, 2]}, "why.other")),
}


def _first(records_by_key, key, lang):
    return records_by_key[key].captions[lang][0]


def _pick_images(keys, subset, count, rng):
    """`count` distinct images, outside `subset` first (each group in a seeded order)."""
    outside = [k for k in keys if k not in subset]
    inside = [k for k in keys if k in subset]
    ordered = ([outside[i] for i in rng.permutation(len(outside))]
               + [inside[i] for i in rng.permutation(len(inside))])
    if len(ordered) < count:
        raise InputError(f"the release has {len(ordered)} images; the guidelines and practice "
                         f"need {count}")
    return ordered[:count]


def _other_caption(records_by_key, keys, key, lang, rng):
    """A caption of another image that differs from `key`'s own, and that image."""
    own = _first(records_by_key, key, lang)
    others = [k for k in keys if k != key and _first(records_by_key, k, lang) != own]
    if not others:
        raise InputError(f"{lang}: every image of the release has the same first caption; no "
                         f"example of another image's caption can be made")
    other = others[int(rng.integers(len(others)))]
    return _first(records_by_key, other, lang), other


def build(session_type, langs, records, subset, rng):
    """The guideline examples and practice items of a session.

    Args:
        session_type: "sxs", "quality" or "thumb".
        langs: the session's languages.
        records: the release's records (data/releases/xm3600.py), in file order.
        subset: the rated image keys.
        rng: a numpy Generator (seeded by the session's seed).

    Returns:
        (examples, practice): examples [{"lang", "image", "own", "other", "other_image"}]
        and practice items [{"id", "lang", "image", "texts", "sources", "accept", "why"}].

    Raises:
        InputError: the release is too small or its captions all the same.
    """
    by_key = {r.key: r for r in records}
    keys = [r.key for r in records]
    subset = set(subset)
    examples, practice = [], []
    for lang in langs:
        images = _pick_images(keys, subset, 1 + PRACTICE_ITEMS, rng)
        other, other_image = _other_caption(by_key, keys, images[0], lang, rng)
        examples.append({"lang": lang, "image": images[0],
                         "own": _first(by_key, images[0], lang), "other": other,
                         "other_image": other_image})
        for n, (image, (kind, accept, why)) in enumerate(
                zip(images[1:], _PLANS[session_type], strict=True), start=1):
            own = _first(by_key, image, lang)
            own_source = {"system": "references", "image": image}
            if kind in ("other", "own-left", "own-right"):
                other, other_image = _other_caption(by_key, keys, image, lang, rng)
                other_source = {"system": "references", "image": other_image}
            if kind == "own":
                texts, sources = [own], [own_source]
            elif kind == "other":
                texts, sources = [other], [other_source]
            elif kind == "identical":
                texts, sources = [own, own], [own_source, own_source]
            elif kind == "own-left":
                texts, sources = [own, other], [own_source, other_source]
            else:
                texts, sources = [other, own], [other_source, own_source]
            practice.append({"id": f"practice-{lang}-{n}", "lang": lang, "image": image,
                             "texts": texts, "sources": sources, "accept": accept, "why": why})
    return examples, practice


def is_correct(item, answer):
    """Whether a checked answer is one the practice item accepts."""
    return all(answer[field] in allowed for field, allowed in item["accept"].items())


def describe(session_type, answer, wording):
    """An answer in the rater's words ("Left better"; "Good"; "Precision 4, Recall 3")."""
    if session_type == "sxs":
        return wording(f"sxs.{answer['choice']}")
    if session_type == "quality":
        return wording(f"quality.{answer['quality']}")
    parts = [f"{wording('thumb.' + field)} {answer[field]:g}" for field in scales.THUMB_FIELDS
             if field in answer]
    return ", ".join(parts)


def describe_accepted(session_type, item, wording):
    """What the practice item expects, in the rater's words ("Left much better / Left better /
    Left slightly better"; "Precision 1 or 2")."""
    if session_type == "thumb":
        return "; ".join(f"{wording('thumb.' + field)} "
                         f"{' / '.join(str(v) for v in allowed)}"
                         for field, allowed in item["accept"].items())
    (field, allowed), = item["accept"].items()
    return " / ".join(describe(session_type, {field: v}, wording) for v in allowed)
