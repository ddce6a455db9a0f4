"""Simulated raters: fills a session's database with ratings drawn from a known model.

For the tests (a synthetic session whose answers are known) and for trying the whole pipeline
before real raters exist: `python -m tools.humaneval simulate --session S`. Simulated ratings are
stored with source "simulated", and reports say so on their first line; they are never a
substitute for people. A session where any person has begun is refused: a participant
enrolled, an introduction step or practice answer, an item shown or a rating by a person
(store.people): simulated ratings would fill the rest of that rater's list (the person would
then find it done, and a crowd participant get the completion code) and mix with theirs.
`force=True` (`--force`) simulates anyway, but only the raters no person has begun (their
lists stay theirs), marked "simulated" as always; `export --exclude-simulated` and
`analyze --exclude-simulated` leave them out again. A crowd study that has been served
(store.init's "served") is never simulated, `--force` included, unless the owner names the
slots (`raters`, `--raters`): a simulated slot is a slot no participant can take. Naming a
slot a person has begun is refused, `--force` included (nothing is stored).

A simulated rater answers a test item from a latent value: `truth(item)` plus the rater's
bias plus Gaussian noise, rounded and clipped to the scale. sxs: the latent value is m2's
advantage on the 7-point scale (default: `scale` times the per-image CIDEr-D difference m2 - m1
recorded in the session). quality and thumb: the latent value is a level (quality Bad 1 ..
Excellent 4; thumb precision and recall 1..5; default from per-image CIDEr-D relative to the
language's best, the release's own captions at 3.5). On gold items a rater answers correctly,
except a `careless` one, who answers at random with that probability.
"""

import numpy as np

from errors import InputError
from tools.humaneval import scales
from tools.humaneval import store as store_lib

QUALITY_BY_LEVEL = {1: "Bad", 2: "Medium", 3: "Good", 4: "Excellent"}


def cider_truth(session, scale=2.0):
    """The default truth(item) of a session, from the per-image CIDEr-D it recorded."""
    per_image = {sid: s.get("cider_per_image") or {} for sid, s in session.systems.items()}
    best = {lang: max([max(v[lang].values()) for v in per_image.values() if v.get(lang)] or [1.0])
            for lang in session.langs}

    def cider(system, lang, key):
        return per_image.get(system, {}).get(lang, {}).get(key)

    def truth(item):
        if session.type == "sxs":
            a, b = cider("m2", item.lang, item.image), cider("m1", item.lang, item.image)
            return 0.0 if a is None or b is None else scale * (a - b)
        value = cider(item.sources[0]["system"], item.lang, item.image)
        high = 4 if session.type == "quality" else 5
        if value is None:  # the release's own captions
            return 3.5 if session.type == "quality" else 4.5
        return 1 + (high - 1) * min(1.0, max(0.0, value / (best[item.lang] or 1.0)))
    return truth


def _gold_answer(session_type, item):
    if session_type == "sxs":
        if item.kind == "gold-identical":
            return {"choice": 0}
        own = next(s for s, src in enumerate(item.sources) if src["image"] == item.image)
        return {"choice": 3 if own == 1 else -3}
    if session_type == "quality":
        return {"quality": "Bad"}
    return {"P": 1, "R": 1, "Fl": 0.0, "Con": 0.0, "Inc": 0.0}


def _random_answer(session_type, rng):
    if session_type == "sxs":
        return {"choice": int(rng.integers(-3, 4))}
    if session_type == "quality":
        return {"quality": scales.QUALITY_CHOICES[int(rng.integers(5))][0]}
    p_choices, r_choices = scales.THUMB_CHOICES["P"], scales.THUMB_CHOICES["R"]
    return {"P": p_choices[int(rng.integers(len(p_choices)))],
            "R": r_choices[int(rng.integers(len(r_choices)))], "Fl": 0.0, "Con": 0.0,
            "Inc": 0.0}


def answer(session_type, item, latent):
    """The answer of a rater whose latent value for `item` is `latent` (see the docstring)."""
    if session_type == "sxs":
        score = int(np.clip(np.rint(latent), -3, 3))
        m2_side = item.side_of("m2")
        return {"choice": score if m2_side == 1 else -score}
    if session_type == "quality":
        return {"quality": QUALITY_BY_LEVEL[int(np.clip(np.rint(latent), 1, 4))]}
    level = int(np.clip(np.rint(latent), 1, 5))
    return {"P": level, "R": level, "Fl": 0.0, "Con": 0.0, "Inc": 0.0}


def simulate(session, *, truth=None, biases=None, noise=0.5, careless=None, seed=0,
             raters=None, force=False):
    """Rates every item each rater has not rated yet, storing source "simulated".

    Args:
        session: a `Session`.
        truth: fn(item) -> latent value; default `cider_truth(session)`.
        biases: {rater name: added to every latent value} (default 0).
        noise: standard deviation of the Gaussian noise.
        careless: {rater name: probability of a random answer on a gold item}.
        seed: of the noise.
        raters: names of the raters to simulate (default all; a served crowd study needs
            them named).
        force: simulate the raters no person has begun even when people have begun under
            others (see the module docstring).

    Returns:
        The number of ratings stored.

    Raises:
        InputError: a person has begun under a rater named in `raters`, or under a rater to
            simulate and `force` is not set, a served crowd study without named raters, or an
            unknown rater (nothing is stored).
    """
    unknown = sorted(set(raters or ()) - set(session.by_name))
    if unknown:
        raise InputError(f"--raters: no rater {unknown[0]!r} in the session")
    truth = truth or cider_truth(session)
    rng = np.random.default_rng(seed)
    store_lib.init(session.db_path, session.digest)
    stored = 0
    with store_lib.Store(session.db_path) as db:
        people = {name: what for name, what in db.people().items()
                  if raters is None or name in raters}
        if people and raters is not None:  # Named: the owner means them, and cannot have them.
            name, what = sorted(people.items())[0]
            raise InputError(
                f"--raters: a person has begun under {name} ({', '.join(what)}"
                + (f"; and {len(people) - 1} more of those named" if len(people) > 1 else "")
                + "): a person's list stays theirs, --force included; name only slots no "
                "person has begun")
        if people and not force:
            begun = ", ".join(f"{name} ({', '.join(what)})"
                              for name, what in sorted(people.items())[:3])
            raise InputError(
                f"{session.db_path}: people have begun under {len(people)} rater(s) (e.g. "
                f"{begun}): simulated ratings would fill their lists and mix with theirs. "
                f"Simulate in a copy of the session, or pass --force (only the raters no "
                f"person has begun are simulated; the ratings stay marked simulated, and "
                f"export and analyze --exclude-simulated leave them out)")
        if session.crowd is not None and db.served() and raters is None:
            raise InputError(
                f"{session.folder}: a crowd study that has been served: simulated ratings would "
                f"take the slots its participants are given (--force included). Simulate in a "
                f"copy of the session, or name the slots to fill with --raters NAME,...")
        for rater in session.raters:
            if (raters is not None and rater.name not in raters) or rater.name in people:
                continue
            done = db.rated_items(rater.name)
            bias = (biases or {}).get(rater.name, 0.0)
            for position, item in enumerate(session.assignment(rater.name), start=1):
                if item.id in done:
                    continue
                if not item.is_gold:
                    reply = answer(session.type, item, truth(item) + bias + noise *
                                   rng.standard_normal())
                elif rng.random() < (careless or {}).get(rater.name, 0.0):
                    reply = _random_answer(session.type, rng)
                else:
                    reply = _gold_answer(session.type, item)
                db.add_rating(rater.name, item.id, position, reply, source="simulated")
                stored += 1
    return stored
