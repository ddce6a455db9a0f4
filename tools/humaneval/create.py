"""Builds a session from results folders (or the release's references) and writes it.

Randomization is seeded and recorded in the session file: which side each model's caption is
shown on (per item, as the paper's per-example left/right order), which images the gold items
use, how items are spread over raters and each rater's order. Rater tokens are the one thing
not seeded: they are secrets (secrets.token_hex).

Raters: each language has its own raters (the paper's raters rate in their language). Every
item gets `replication` distinct raters of its language, spread round-robin so loads differ by
at most one item; with exactly `replication` raters each rater rates every item of the
language, as in the paper (three raters per pair). `quota` (items per rater) makes as many
rater slots per language as it takes for no slot to hold more: a crowd study's participants
each get a slot of at most that many items.

Checks that say a session would mislead: results folders whose captions are identical in a
language (the same model twice) are an error, and so is a per_image.jsonl that lacks a score
of a rated image (that language's delta CIDEr would be silently missing). Warnings (`warn`):
some identical captions, empty or blank captions (the page shows them as empty), captions
longer than LONG_CAPTION characters or with a run of more than UNBROKEN_RUN characters
without a space (the page wraps and scrolls them), no per_image.jsonl at all, a translation
that leaves texts in English.
"""

import dataclasses
import datetime
import math
import os
import re
import secrets

import numpy as np

from data import languages
from data.releases import xm3600 as xm3600_release
from errors import InputError
from formats import predictions as predictions_format
from tools.humaneval import practice, subsets, texts
from tools.humaneval import results as results_lib
from tools.humaneval import session as session_lib
from tools.humaneval.rating_stats import MIN_RATINGS, STRAIGHT_SHARE

REFERENCES = "references"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_CODE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
LONG_CAPTION = 400  # characters: a caption longer than this is warned about
UNBROKEN_RUN = 80  # characters without a space: warned about (the page breaks them anyway)
IDLE_SECONDS = 30.0  # default of --idle-seconds: a pause longer than this is not active time
MIN_SECONDS = 2.0  # default of --min-seconds: a median time per item below it is too fast
GOLD_SHARE = 0.1  # the share of attention checks by default (raised where slots would lack one)


@dataclasses.dataclass(frozen=True)
class Spec:
    """What a session is made of (the flags of `python -m tools.humaneval create`).

    Attributes:
        type: "sxs", "quality" or "thumb".
        release: the XM3600 release folder (captions.jsonl, images/).
        langs: language codes.
        systems: [(name, results folder)]; sxs: exactly (m1 = base, m2 = test).
        references: also rate the release's own captions (quality, thumb).
        subset_size: None for XM600, else the number of images.
        subset_seed: the seed of a sized subset.
        replication: raters per item.
        raters: --raters values (see `parse_raters`).
        gold_share: gold items per language as a share of its test items (None: GOLD_SHARE,
            or the smallest share above it that gives every rater slot one: `_gold_share`).
        gold_max_failure_rate: a rater failing more than this share of gold items is flagged.
        idle_seconds: a pause without input longer than this is not active time (rate.js).
        min_seconds: a median time per item below this is too fast (rating_stats).
        seed: seeds every random choice.
        name: the session's name in reports.
        consent: a text file with the consent the raters agree to before they start (None:
            no consent page).
        translations: ((lang, translation file), ...) (tools/humaneval/texts.py).
        crowd: open enrolment links (tools/humaneval/crowd.py) instead of personal links.
        quota: at most this many items per rater slot (None: as --raters gives).
        completion_code: what a crowd participant gets at the end (default: random).
        completion_url: where a crowd participant goes at the end ("{code}" is replaced;
            default: Prolific's completion URL for Prolific participants, none otherwise).
    """
    type: str
    release: str
    langs: tuple
    systems: tuple
    references: bool = False
    subset_size: int | None = None
    subset_seed: int = 0
    replication: int = 3
    raters: tuple = ()
    gold_share: float | None = None
    gold_max_failure_rate: float = 0.0
    idle_seconds: float = IDLE_SECONDS
    min_seconds: float = MIN_SECONDS
    seed: int = 0
    name: str = "session"
    consent: str | None = None
    translations: tuple = ()
    crowd: bool = False
    quota: int | None = None
    completion_code: str | None = None
    completion_url: str | None = None


def parse_raters(specs, langs, replication):
    """{lang: [rater names]} from --raters values: each a count ("3": <lang>-1..<lang>-3 in
    every language) or "lang=name,name,..."; `replication` is the default count and the
    minimum. InputError: a malformed value or name, a repeated name, too few raters."""
    count, named = replication, {}
    for spec in specs or ():
        spec = spec.strip()
        if spec.isdigit():
            count = int(spec)
            continue
        lang, sep, names = spec.partition("=")
        if not sep or lang not in langs:
            raise InputError(f"--raters {spec!r}: expected a count or LANG=NAME,NAME,... with "
                             f"LANG one of the session's languages {', '.join(langs)}")
        named[lang] = [n.strip() for n in names.split(",") if n.strip()]
    out = {lang: named.get(lang, [f"{lang}-{i + 1}" for i in range(count)]) for lang in langs}
    seen = set()
    for lang, names in out.items():
        for name in names:
            if not _NAME.match(name) or name in seen:
                raise InputError(f"--raters: rater name {name!r} is repeated or not made of "
                                 f"letters, digits, '.', '_', '-'")
            seen.add(name)
        if len(names) < replication:
            raise InputError(f"--raters: {lang} has {len(names)} rater(s), fewer than the "
                             f"replication {replication}")
    return out


def _check_spec(spec):
    if spec.type not in ("sxs", "quality", "thumb"):
        raise InputError(f"--type: unknown {spec.type!r}; known: sxs, quality, thumb")
    try:
        languages.check_langs(spec.langs)
    except ValueError as e:
        raise InputError(f"--langs: {e}") from None
    if spec.type == "sxs" and (len(spec.systems) != 2 or spec.references):
        raise InputError("an sxs session compares two results folders: --m1 BASE --m2 TEST")
    if spec.type != "sxs" and not spec.systems and not spec.references:
        raise InputError("nothing to rate: give --results FOLDER (repeatable) or --references")
    paths = [os.path.realpath(path) for _, path in spec.systems]
    if len(set(paths)) != len(paths):
        raise InputError(f"the same results folder is given twice: {spec.systems}")
    names = [name for name, _ in spec.systems] + ([REFERENCES] if spec.references else [])
    if len(set(names)) != len(names) or not all(_NAME.match(n) for n in names):
        raise InputError(f"model names must be distinct words (letters, digits, '.', '_', "
                         f"'-'): {names}")
    if spec.replication < 1:
        raise InputError(f"--replication must be >= 1, got {spec.replication}")
    if spec.seed < 0:
        raise InputError(f"--seed must be >= 0 (numpy's generators take no negative seed), "
                         f"got {spec.seed}")
    for flag, value in (("--gold-share", spec.gold_share),
                        ("--gold-max-failure-rate", spec.gold_max_failure_rate)):
        if value is not None and not 0 <= value <= 1:
            raise InputError(f"{flag} must be in [0, 1], got {value}")
    if not 1 <= spec.idle_seconds <= 600:
        raise InputError(f"--idle-seconds must be in [1, 600], got {spec.idle_seconds}")
    if not 0 <= spec.min_seconds <= 600:
        raise InputError(f"--min-seconds must be in [0, 600], got {spec.min_seconds}")
    if spec.quota is not None and spec.raters:
        raise InputError("--quota N sizes the rater slots itself: give --quota or --raters, "
                         "not both")
    if spec.quota is not None and spec.quota < MIN_RATINGS:
        raise InputError(f"--quota {spec.quota}: a rater needs at least {MIN_RATINGS} items for "
                         f"straight-lining (one answer to nearly every item) to be judged; "
                         f"give --quota {MIN_RATINGS} or more")
    if spec.crowd and not spec.consent:
        raise InputError("a crowd study needs --consent FILE: the text the participants agree "
                         "to (your ethics approval's)")
    if not spec.crowd and (spec.completion_code or spec.completion_url):
        raise InputError("--completion-code and --completion-url are for --crowd sessions")
    if spec.completion_code is not None and not _CODE.match(spec.completion_code):
        raise InputError(f"--completion-code {spec.completion_code!r}: letters, digits, '_' "
                         f"and '-' only (1-64)")
    if spec.completion_url is not None and not re.match(r"^https?://\S+$",
                                                        spec.completion_url):
        raise InputError(f"--completion-url {spec.completion_url!r}: expected an http(s) URL")


def _choose_images(spec, records):
    keys = [r.key for r in records]
    missing = {lang: sum(lang not in r.captions for r in records) for lang in spec.langs}
    if any(missing.values()):
        lacking = ", ".join(f"{lang} ({n} images)" for lang, n in missing.items() if n)
        raise InputError(f"{spec.release}/captions.jsonl: images without captions in {lacking}:"
                         f" not a release of these languages")
    chosen = (subsets.xm600(keys) if spec.subset_size is None
              else subsets.select(keys, spec.subset_size, spec.subset_seed))
    for key in chosen:
        path = xm3600_release.image_path(spec.release, key)
        if not os.path.isfile(path):
            raise InputError(f"{path} not found: the release folder lacks the image of {key!r}")
    position = {k: i for i, k in enumerate(keys)}
    subset = {"kind": "xm600" if spec.subset_size is None else "seeded",
              "size": len(chosen),
              "seed": subsets.XM600_SEED if spec.subset_size is None else spec.subset_seed,
              "keys": chosen,
              # Each image's 0-based line in captions.jsonl (THUMB's set_id).
              "release_index": [position[k] for k in chosen]}
    return chosen, subset


def _examples(keys):
    return ", ".join(map(repr, keys[:3]))


def _check_captions(results, keys, warn):
    """Warnings about captions that raters would see badly: empty, over-long, unbroken; an
    error when most captions of a language are empty (a failed decoding: little to rate)."""
    for lang, by_key in results.captions.items():
        where = os.path.join(results.path, predictions_format.file_name(lang))
        blank = [k for k in keys if not by_key[k].strip()]
        if 2 * len(blank) > len(keys):
            amount = "all" if len(blank) == len(keys) else f"{len(blank)} of"
            raise InputError(f"{where}: {amount} {len(keys)} of the session's captions in "
                             f"{lang!r} are empty: there is little or nothing to rate (a "
                             f"failed decoding?); evaluate the model again or leave {lang!r} "
                             f"out of --langs")
        if blank:
            warn(f"{where}: {len(blank)} of the session's {len(keys)} captions are empty or "
                 f"blank (e.g. image {_examples(blank)}); raters see them marked as empty")
        long = [k for k in keys if len(by_key[k]) > LONG_CAPTION]
        unbroken = [k for k in keys if any(len(run) > UNBROKEN_RUN
                                           for run in by_key[k].split())]
        if long or unbroken:
            warn(f"{where}: {len(long)} caption(s) longer than {LONG_CAPTION} characters and "
                 f"{len(unbroken)} with more than {UNBROKEN_RUN} characters without a space "
                 f"(e.g. image {_examples(long + unbroken)}); the page wraps and scrolls them, "
                 f"but check that the model's output is what you want rated")


def _check_distinct(spec, captions, keys, warn):
    """Results folders must differ: identical captions in a language are an error."""
    ids = list(captions)
    names = dict(zip(ids, (name for name, _ in spec.systems), strict=False))
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            for lang in spec.langs:
                same = [k for k in keys if captions[a][lang][k] == captions[b][lang][k]]
                if len(same) == len(keys):
                    raise InputError(
                        f"{names[a]} and {names[b]} have identical captions in {lang!r} on all "
                        f"{len(keys)} images of the session: the same model twice? (compare "
                        f"{spec.systems[i][1]} and {spec.systems[ids.index(b)][1]})")
                if same:
                    warn(f"{names[a]} and {names[b]} give identical captions in {lang!r} for "
                         f"{len(same)} of the session's {len(keys)} images (e.g. "
                         f"{_examples(same)}); " + (
                             "raters can only rate those Similar" if spec.type == "sxs" else
                             "the same text is rated once for each of them"))


def _captions(spec, records, keys, warn):
    """({system id: record}, {system id: {lang: {key: caption or [references]}}})."""
    systems, captions = [], {}
    ids = ["m1", "m2"] if spec.type == "sxs" else [f"s{i + 1}" for i in range(len(spec.systems))]
    release_keys = {r.key for r in records}
    for system_id, (name, path) in zip(ids, spec.systems, strict=True):
        results = results_lib.read_results(path, spec.langs, spec.release)
        results_lib.check_against_release(results, release_keys, keys)
        _check_captions(results, keys, warn)
        record = results_lib.describe(results, name)
        if results.per_image is None:
            warn(f"{path} has no per-image scores file: the study's delta CIDEr on the rated "
                 f"images (xm600) will be missing")
        means, per_image = results_lib.subset_cider(results, keys)
        record.update(id=system_id, cider_subset=means, cider_per_image=per_image)
        systems.append(record)
        captions[system_id] = results.captions
    _check_distinct(spec, captions, keys, warn)
    if spec.references:
        systems.append({"id": REFERENCES, "name": REFERENCES, "results": None})
        by_key = {r.key: r for r in records}
        captions[REFERENCES] = {lang: {k: by_key[k].captions[lang] for k in keys}
                                for lang in spec.langs}
    return systems, captions


def _single_items(lang, keys, captions):
    """Test items of quality / thumb sessions: one per (system, image, reference)."""
    items = []
    for system_id, by_lang in captions.items():
        for key in keys:
            texts = by_lang[lang][key]
            for ref, text in enumerate(texts if isinstance(texts, list) else [texts]):
                source = {"system": system_id, "image": key}
                if isinstance(texts, list):
                    source["ref"] = ref
                items.append({"lang": lang, "image": key, "kind": "test", "texts": [text],
                              "sources": [source]})
    return items


def _sxs_items(lang, keys, captions, rng):
    items = []
    for key in keys:
        m2_right = bool(rng.integers(2))
        order = ["m1", "m2"] if m2_right else ["m2", "m1"]
        items.append({"lang": lang, "image": key, "kind": "test",
                      "texts": [captions[s][lang][key] for s in order],
                      "sources": [{"system": s, "image": key} for s in order]})
    return items


def _first_text(captions, system_id, lang, key):
    text = captions[system_id][lang][key]
    return text[0] if isinstance(text, list) else text


def _gold_items(session_type, lang, keys, captions, count, rng):
    """Attention checks: identical captions (sxs), or a caption of another image."""
    items, system_ids = [], list(captions)
    for g in range(count):
        key = keys[int(rng.integers(len(keys)))]
        system_id = system_ids[int(rng.integers(len(system_ids)))]
        own = _first_text(captions, system_id, lang, key)
        if session_type == "sxs" and g % 2 == 0:
            items.append({"lang": lang, "image": key, "kind": "gold-identical",
                          "texts": [own, own],
                          "sources": [{"system": system_id, "image": key}] * 2})
            continue
        others = [k for k in keys if _first_text(captions, system_id, lang, k) != own]
        if not others:
            raise InputError(f"{lang}: every image has the same caption; no gold item of "
                             f"another image's caption can be made (use --gold-share 0)")
        other = others[int(rng.integers(len(others)))]
        wrong = {"system": system_id, "image": other}
        wrong_text = _first_text(captions, system_id, lang, other)
        if session_type != "sxs":
            items.append({"lang": lang, "image": key, "kind": "gold-other-image",
                          "texts": [wrong_text], "sources": [wrong]})
            continue
        right = {"system": system_id, "image": key}
        pair = [(own, right), (wrong_text, wrong)]
        if rng.integers(2):
            pair.reverse()
        items.append({"lang": lang, "image": key, "kind": "gold-other-image",
                      "texts": [t for t, _ in pair], "sources": [s for _, s in pair]})
    return items


def _assign(items, names, replication, rng):
    """{rater: [item ids in their order]}: each item to `replication` raters, round-robin.

    The attention checks go first, so that they spread over the raters: with at least as
    many of their assignments as raters (`_check_gold_spread`), every rater gets one; the
    test items go on where they stop, so loads differ by at most one item."""
    assignments = {name: [] for name in names}
    items = [i for i in items if i["kind"] != "test"] + [i for i in items if i["kind"] == "test"]
    for j, item in enumerate(items):
        for t in range(replication):
            assignments[names[(j * replication + t) % len(names)]].append(item["id"])
    return {name: [ids[i] for i in rng.permutation(len(ids))]
            for name, ids in assignments.items()}


def _plan(spec, lang, tests, named, share):
    """(gold items, rater names, whether every rater gets an attention check) of a language
    with `tests` test items at --gold-share `share`."""
    gold = round(share * tests)
    names = _rater_names(spec, lang, tests + gold, named)
    return gold, names, share == 0 or gold * spec.replication >= len(names)


def _gold_share(spec, keys, captions, named, warn):
    """The default --gold-share: GOLD_SHARE, or the smallest share above it on a 0.001 grid that
    gives every rater slot of every language an attention check (said in a warning); GOLD_SHARE
    where none does (`_check_gold_spread` then says what to do)."""
    tests = {lang: len(keys) if spec.type == "sxs" else len(_single_items(lang, keys, captions))
             for lang in spec.langs}
    share = next((k / 1000 for k in range(round(1000 * GOLD_SHARE), 1001)
                  if all(_plan(spec, lang, count, named, k / 1000)[2]
                         for lang, count in tests.items())), GOLD_SHARE)
    if share != GOLD_SHARE:
        warn(f"--gold-share {share:g}, not {GOLD_SHARE:g}: the smallest share that gives every "
             f"rater slot an attention check (give --gold-share to choose)")
    return share


def _check_gold_spread(spec, lang, tests, named):
    """Refuses a share of attention checks too small for every rater to get one, suggesting
    the smallest share on a 0.001 grid that `_plan` accepts (more checks can mean more
    slots, so the suggestion is the check's own answer, not a ratio)."""
    gold, names, ok = _plan(spec, lang, tests, named, spec.gold_share)
    if ok:
        return
    share = next((k / 1000 for k in range(math.floor(1000 * spec.gold_share) + 1, 1001)
                  if _plan(spec, lang, tests, named, k / 1000)[2]), None)
    raise InputError(
        f"--gold-share {spec.gold_share:g}: {lang!r} gets {gold} attention check(s) for "
        f"{len(names)} rater slots ({gold * spec.replication} assignments at replication "
        f"{spec.replication}): {len(names) - gold * spec.replication} slots would have none. "
        "Give " + (f"--gold-share {share:g} or more, " if share is not None else "")
        + "a larger --quota (fewer slots), or --gold-share 0 for no attention checks at all")


def _read_consent(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
    except FileNotFoundError:
        raise InputError(f"--consent: {path} not found") from None
    except UnicodeDecodeError as e:
        raise InputError(f"--consent: {path}: not UTF-8 ({e.reason})") from None
    if not text:
        raise InputError(f"--consent: {path} is empty")
    return text


def _study(spec, records, keys, warn):
    """The session's "study" block: consent, translations, examples, practice, crowd."""
    consent = _read_consent(spec.consent) if spec.consent else ""
    translations = {}
    for lang, path in spec.translations:
        if lang not in spec.langs:
            raise InputError(f"--translation {lang}={path}: {lang!r} is not a session language "
                             f"({', '.join(spec.langs)})")
        if lang in translations:
            raise InputError(f"--translation: {lang!r} is given twice")
        translations[lang], missing = texts.read_translation(path, lang)
        if missing:
            warn(f"{path}: {len(missing)} text(s) not translated, shown in English (e.g. "
                 f"{', '.join(missing[:3])})")
        if consent and "consent.text" not in translations[lang]:
            warn(f"{path}: no 'consent.text': {lang} raters read the consent in English")
    # A generator of its own, so that the items of a seed stay what they were.
    examples, practice_items = practice.build(spec.type, spec.langs, records, keys,
                                              np.random.default_rng([spec.seed, 1]))
    crowd = None
    if spec.crowd:
        crowd = {"enrol_token": secrets.token_hex(16), "quota": spec.quota,
                 "completion_code": spec.completion_code or secrets.token_hex(4).upper(),
                 "completion_url": spec.completion_url}
    return {"owner_token": secrets.token_hex(16), "consent": consent,
            "translations": translations, "examples": examples, "practice": practice_items,
            "crowd": crowd}


def _rater_names(spec, lang, count_items, named):
    """The rater names of a language: --raters's, or as many as --quota needs."""
    if spec.quota is None:
        return named[lang]
    count = max(spec.replication, math.ceil(count_items * spec.replication / spec.quota))
    return [f"{lang}-{i + 1}" for i in range(count)]


def _judged_quota(spec, count_items):
    """The smallest --quota from spec.quota up whose slots (`_rater_names`, loads spread
    round-robin) all get MIN_RATINGS items or more, or None (too few items for any)."""
    total = count_items * spec.replication
    return next((quota for quota in range(spec.quota, total + 1)
                 if total // max(spec.replication, math.ceil(total / quota)) >= MIN_RATINGS),
                None)


def build(spec, warn=None):
    """The session (without its digest) that `spec` describes.

    Args:
        spec: a `Spec`.
        warn: fn(message) for what create warns about (see the module docstring).

    Raises:
        InputError: bad flags, or a release / results folder that does not fit (other images
            or languages, missing images, missing predictions or per-image scores, identical
            results folders).
    """
    warn = warn or (lambda message: None)
    _check_spec(spec)
    records = results_lib.read_release(spec.release)
    keys, subset = _choose_images(spec, records)
    systems, captions = _captions(spec, records, keys, warn)
    raters = parse_raters(spec.raters, spec.langs, spec.replication)
    if spec.gold_share is None:
        spec = dataclasses.replace(spec, gold_share=_gold_share(spec, keys, captions, raters,
                                                                warn))
    rng = np.random.default_rng(spec.seed)
    items, rater_list, assignments = [], [], {}
    for lang in spec.langs:
        tests = (_sxs_items(lang, keys, captions, rng) if spec.type == "sxs"
                 else _single_items(lang, keys, captions))
        _check_gold_spread(spec, lang, len(tests), raters)
        gold = _gold_items(spec.type, lang, keys, captions,
                           round(spec.gold_share * len(tests)), rng)
        lang_items = [(tests + gold)[i] for i in rng.permutation(len(tests) + len(gold))]
        for n, item in enumerate(lang_items):
            item["id"] = f"{lang}-{n + 1:05d}"
        items += lang_items
        names = _rater_names(spec, lang, len(lang_items), raters)
        rater_list += [{"name": name, "lang": lang, "token": secrets.token_hex(16)}
                       for name in names]
        assignments.update(_assign(lang_items, names, spec.replication, rng))
        loads = [len(assignments[name]) for name in names]
        if spec.quota is not None and min(loads) < MIN_RATINGS:
            quota = _judged_quota(spec, len(lang_items))
            warn(f"{lang!r}: its rater slots get {min(loads)}-{max(loads)} items, fewer than "
                 f"the {MIN_RATINGS} straight-lining is judged on; " + (
                     f"give --quota {quota}, the smallest whose slots all get {MIN_RATINGS} or "
                     f"more" if quota else f"give more images: at replication "
                     f"{spec.replication} a slot gets at most the {len(lang_items)} items"))
    return {
        "format": session_lib.FORMAT, "type": spec.type, "name": spec.name,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seed": spec.seed, "release": os.path.abspath(spec.release),
        "langs": list(spec.langs), "replication": spec.replication, "subset": subset,
        "gold": {"share": spec.gold_share, "max_failure_rate": spec.gold_max_failure_rate},
        "checks": {"idle_seconds": spec.idle_seconds, "min_seconds": spec.min_seconds,
                   "straight_share": STRAIGHT_SHARE, "min_ratings": MIN_RATINGS},
        "systems": systems, "items": items, "raters": rater_list,
        "assignments": assignments, "study": _study(spec, records, keys, warn)}


def create(spec, out, warn=None):
    """Builds the session of `spec` and writes it to the folder `out`; returns the Session.

    `warn`: fn(message) for what deserves a look but does not stop the session (`build`).
    """
    session_lib.check_new_folder(out)  # before any work (and any warning)
    path = session_lib.write(out, build(spec, warn))
    return session_lib.load(os.path.dirname(path))
