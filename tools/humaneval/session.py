"""A human-evaluation session: its file, the checks run when it is read, and lookups.

A session is a folder holding `session.json` (written once by `python -m tools.humaneval create`,
see tools/humaneval/create.py) and `ratings.sqlite` (tools/humaneval/store.py). session.json is

    {"format": FORMAT, "type": "sxs" | "quality" | "thumb", "name", "created", "seed",
     "release": XM3600 release folder, "langs": [...], "replication": raters per item,
     "subset": {"kind": "xm600" | "seeded", "size", "seed", "keys": [...],
                "release_index": [line of each key in captions.jsonl, from 0]},
     "gold": {"share", "max_failure_rate"},
     "checks": {"idle_seconds": the pause after which the page stops counting active time,
                "min_seconds": a median active time per item below it flags a rater,
                "straight_share", "min_ratings": a rater giving one answer to at least
                    that share of at least that many items is flagged (rating_stats)},
     "systems": [{"id": "m1" | "m2" | "s1".. | "references", "name", "results", "step",
                  "cider_xm3600": {lang: x}, "cider_coco_dev": {lang: x},
                  "cider_subset": {lang: x}, "cider_per_image": {lang: {key: x}}}, ...],
     "items": [{"id", "lang", "image", "kind": "test" | "gold-identical" | "gold-other-image",
                "texts": [caption, ...], "sources": [{"system", "image", "ref"?}, ...]}, ...],
     "raters": [{"name", "lang", "token"}, ...],
     "assignments": {rater name: [item ids in the order the rater sees them]},
     "study": {"owner_token": the dashboard's secret,
               "consent": the owner's consent text ("" for none),
               "translations": {lang: {text key: text}} (tools/humaneval/texts.py),
               "examples": [{"lang", "image", "own", "other", "other_image"}],
               "practice": [{"id", "lang", "image", "texts", "sources", "accept", "why"}],
               "crowd": null, or {"enrol_token", "quota", "completion_code",
                                  "completion_url"}},
     "digest": sha256 of everything above}

An sxs item has two texts, left and right, and its sources say which model wrote each (the
recorded left/right order); quality and thumb items have one. The guideline examples and
practice items (practice.py) are the release's own captions, never rated items. `load`
checks the structure, the cross references and the digest, so a file edited by hand is an
`error:` naming the key, never a wrong analysis. The file holds every secret of the study (the
raters' tokens, the dashboard's and the enrolment link's), so it is written readable by its
owner only (0600).
"""

import contextlib
import dataclasses
import hashlib
import json
import os

import files
from data import jsonl, languages
from errors import InputError, RunError
from tools.humaneval.scales import SESSION_TYPES

FORMAT = "xm3600-humaneval-session/3"
SESSION_FILE = "session.json"
ITEM_KINDS = ("test", "gold-identical", "gold-other-image")
_TOP_LEVEL = {"format": str, "type": str, "name": str, "created": str, "seed": int,
              "release": str, "langs": list, "replication": int, "subset": dict, "gold": dict,
              "systems": list, "items": list, "raters": list, "assignments": dict,
              "study": dict, "checks": dict, "digest": str}
_CHECKS = {"idle_seconds": (1, 600), "min_seconds": (0, 600), "straight_share": (0, 1),
           "min_ratings": (1, 10 ** 6)}
_STUDY = {"owner_token": str, "consent": str, "translations": dict, "examples": list,
          "practice": list}


@dataclasses.dataclass(frozen=True)
class Item:
    """One thing to rate: an image with one caption (quality, thumb) or two (sxs, left/right)."""
    id: str
    lang: str
    image: str
    kind: str
    texts: tuple
    sources: tuple

    @property
    def is_gold(self):
        return self.kind != "test"

    def side_of(self, system):
        """Index (0 left, 1 right) of the text `system` wrote for this image, or None."""
        for side, source in enumerate(self.sources):
            if source["system"] == system and source["image"] == self.image:
                return side
        return None


@dataclasses.dataclass(frozen=True)
class Rater:
    """A rater: name (in reports), language, and the secret token of their link."""
    name: str
    lang: str
    token: str


class Session:
    """A checked session file (use `load`)."""

    def __init__(self, folder, data):
        self.folder = os.path.abspath(folder)
        self.data = data
        self.type = data["type"]
        self.langs = tuple(data["langs"])
        self.replication = data["replication"]
        self.digest = data["digest"]
        self.systems = {s["id"]: s for s in data["systems"]}
        self.items = {i["id"]: Item(i["id"], i["lang"], i["image"], i["kind"],
                                    tuple(i["texts"]), tuple(i["sources"]))
                      for i in data["items"]}
        self.raters = [Rater(r["name"], r["lang"], r["token"]) for r in data["raters"]]
        self.by_token = {r.token: r for r in self.raters}
        self.by_name = {r.name: r for r in self.raters}
        self.assignments = {name: tuple(ids) for name, ids in data["assignments"].items()}
        # {rater: {item id: 1-based place in the rater's order}}
        self.positions = {name: {item_id: n for n, item_id in enumerate(ids, start=1)}
                          for name, ids in self.assignments.items()}
        study = data["study"]
        self.checks = data["checks"]
        self.owner_token = study["owner_token"]
        self.crowd = study["crowd"]
        self.examples = {e["lang"]: e for e in study["examples"]}
        # {lang: [practice items in the order shown]}
        self.practice = {lang: [p for p in study["practice"] if p["lang"] == lang]
                         for lang in self.langs}

    @property
    def db_path(self):
        return os.path.join(self.folder, "ratings.sqlite")

    def assignment(self, rater_name):
        """The rater's items, in the order they are shown."""
        return [self.items[i] for i in self.assignments[rater_name]]


def digest(data):
    """sha256 of the session's content without its "digest" field (canonical JSON)."""
    content = {k: v for k, v in data.items() if k != "digest"}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_new_folder(folder):
    """Raises InputError when `folder` holds a session or ratings already."""
    for name in (SESSION_FILE, "ratings.sqlite"):
        if os.path.exists(os.path.join(folder, name)):
            raise InputError(f"{os.path.join(folder, name)} exists: a session folder is written "
                             f"once; choose a new --out")


def write(folder, data):
    """Writes session.json into a new or empty folder; returns its path.

    Args:
        folder: the session folder.
        data: the session (without "digest"; it is added).

    Raises:
        InputError: the folder already holds a session or ratings (nothing is overwritten).
        RunError: the file could not be written (a full disk): nothing is left of it.
    """
    check_new_folder(folder)
    path = os.path.join(folder, SESSION_FILE)
    data = dict(data, digest=digest(data))
    created = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        # Whole or not at all, 0600: the file holds the raters' tokens and the dashboard's.
        files.write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                         permissions=0o600)
    except OSError as e:
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise RunError(f"{path}: the session could not be written ({e.strerror or e}); "
                       f"nothing was written: make room and create it again") from None
    return path


def _expect(value, kind, where):
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise InputError(f"{where}: expected {kind.__name__}, got {value!r}"[:300])
    return value


def _strings(value, where, count=None):
    _expect(value, list, where)
    for i, v in enumerate(value):
        _expect(v, str, f"{where}[{i}]")
    if count is not None and len(value) != count:
        raise InputError(f"{where}: expected {count} entries, got {len(value)}")
    return value


def _check_items(data, path, system_ids, texts_per_item):
    ids = set()
    for n, item in enumerate(data["items"]):
        where = f"{path}: items[{n}]"
        _expect(item, dict, where)
        for key, kind in (("id", str), ("lang", str), ("image", str), ("kind", str),
                          ("texts", list), ("sources", list)):
            _expect(item.get(key), kind, f"{where}.{key}")
        if item["id"] in ids:
            raise InputError(f"{where}.id: {item['id']!r} repeats")
        ids.add(item["id"])
        if item["lang"] not in data["langs"]:
            raise InputError(f"{where}.lang: {item['lang']!r} is not a session language")
        if item["kind"] not in ITEM_KINDS:
            raise InputError(f"{where}.kind: unknown {item['kind']!r}; known: "
                             f"{', '.join(ITEM_KINDS)}")
        _strings(item["texts"], f"{where}.texts", texts_per_item)
        if len(item["sources"]) != texts_per_item:
            raise InputError(f"{where}.sources: expected {texts_per_item} entries")
        for s, source in enumerate(item["sources"]):
            _expect(source, dict, f"{where}.sources[{s}]")
            if source.get("system") not in system_ids:
                raise InputError(f"{where}.sources[{s}].system: unknown "
                                 f"{source.get('system')!r}")
            _expect(source.get("image"), str, f"{where}.sources[{s}].image")
    return ids


def _check_raters(data, path, item_langs):
    names, tokens = set(), set()
    for n, rater in enumerate(data["raters"]):
        where = f"{path}: raters[{n}]"
        _expect(rater, dict, where)
        for key in ("name", "lang", "token"):
            _expect(rater.get(key), str, f"{where}.{key}")
        if rater["name"] in names or rater["token"] in tokens:
            raise InputError(f"{where}: name or token repeats")
        names.add(rater["name"])
        tokens.add(rater["token"])
        if rater["lang"] not in data["langs"]:
            raise InputError(f"{where}.lang: {rater['lang']!r} is not a session language")
    if set(data["assignments"]) != names:
        raise InputError(f"{path}: assignments: raters {sorted(set(data['assignments']) ^ names)}"
                         f" are in one of raters / assignments only")
    lang_of = {r["name"]: r["lang"] for r in data["raters"]}
    for name, ids in data["assignments"].items():
        where = f"{path}: assignments[{name!r}]"
        _strings(ids, where)
        if len(set(ids)) != len(ids):
            raise InputError(f"{where}: an item repeats")
        for item_id in ids:
            if item_langs.get(item_id) != lang_of[name]:
                raise InputError(f"{where}: item {item_id!r} is unknown or not in the rater's "
                                 f"language {lang_of[name]!r}")


def _check_study(data, path):
    study = data["study"]
    for key, kind in _STUDY.items():
        _expect(study.get(key), kind, f"{path}: study.{key}")
    if "crowd" not in study:
        raise InputError(f"{path}: missing key 'study.crowd'")
    crowd = study["crowd"]
    if crowd is not None:
        _expect(crowd, dict, f"{path}: study.crowd")
        for key, kind in (("enrol_token", str), ("completion_code", str)):
            _expect(crowd.get(key), kind, f"{path}: study.crowd.{key}")
        if crowd.get("quota") is not None:
            _expect(crowd["quota"], int, f"{path}: study.crowd.quota")
    for lang in study["translations"]:
        if lang not in data["langs"]:
            raise InputError(f"{path}: study.translations: {lang!r} is not a session language")
    langs = {e.get("lang") for e in study["examples"] if isinstance(e, dict)}
    if langs != set(data["langs"]):
        raise InputError(f"{path}: study.examples: expected one per session language")
    texts = 2 if data["type"] == "sxs" else 1
    for n, item in enumerate(study["practice"]):
        where = f"{path}: study.practice[{n}]"
        _expect(item, dict, where)
        for key, kind in (("id", str), ("lang", str), ("image", str), ("accept", dict),
                          ("why", str)):
            _expect(item.get(key), kind, f"{where}.{key}")
        _strings(item.get("texts"), f"{where}.texts", texts)
        if item["lang"] not in data["langs"]:
            raise InputError(f"{where}.lang: {item['lang']!r} is not a session language")


def check(data, path):
    """Checks a parsed session file; raises InputError naming the key at fault."""
    _expect(data, dict, path)
    if data.get("format") != FORMAT and isinstance(data.get("format"), str) \
            and data["format"].startswith("xm3600-humaneval-session/"):
        raise InputError(f"{path}: format {data['format']!r} was written by an older version "
                         f"of the kit (this one reads {FORMAT!r}: guidelines, practice, "
                         f"consent, crowd links, rater checks); create the session again")
    for key, kind in _TOP_LEVEL.items():
        if key not in data:
            raise InputError(f"{path}: missing key {key!r}")
        _expect(data[key], kind, f"{path}: {key}")
    if data["format"] != FORMAT:
        raise InputError(f"{path}: format {data['format']!r} is not {FORMAT!r}")
    if data["type"] not in SESSION_TYPES:
        raise InputError(f"{path}: type: unknown {data['type']!r}; known: "
                         f"{', '.join(SESSION_TYPES)}")
    try:
        languages.check_langs(_strings(data["langs"], f"{path}: langs"))
    except ValueError as e:
        raise InputError(f"{path}: langs: {e}") from None
    if data["replication"] < 1:
        raise InputError(f"{path}: replication: must be >= 1")
    system_ids = set()
    for n, system in enumerate(data["systems"]):
        _expect(system, dict, f"{path}: systems[{n}]")
        system_ids.add(_expect(system.get("id"), str, f"{path}: systems[{n}].id"))
        _expect(system.get("name"), str, f"{path}: systems[{n}].name")
    if data["type"] == "sxs" and system_ids != {"m1", "m2"}:
        raise InputError(f"{path}: systems: an sxs session compares exactly m1 and m2")
    _check_items(data, path, system_ids, 2 if data["type"] == "sxs" else 1)
    _check_raters(data, path, {i["id"]: i["lang"] for i in data["items"]})
    _check_study(data, path)
    for key in ("share", "max_failure_rate"):
        value = data["gold"].get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InputError(f"{path}: gold.{key}: expected a number in [0, 1], got {value!r}")
    for key, (low, high) in _CHECKS.items():
        value = data["checks"].get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not low <= value <= high:
            raise InputError(f"{path}: checks.{key}: expected a number in [{low}, {high}], "
                             f"got {value!r}")
    if digest(data) != data["digest"]:
        raise InputError(f"{path}: its content does not match its digest: the file was edited "
                         f"after `python -m tools.humaneval create` wrote it; restore it or "
                         f"create a new session")


def load(folder):
    """Reads and checks `folder`/session.json.

    Args:
        folder: a session folder (or the session.json file itself).

    Returns:
        A `Session`.

    Raises:
        InputError: the file is missing, not JSON, or fails a check (the key is named).
    """
    if os.path.basename(folder) == SESSION_FILE:
        folder = os.path.dirname(folder) or "."
    path = os.path.join(folder, SESSION_FILE)
    if not os.path.isfile(path):
        raise InputError(f"{path} not found: create a session with "
                         f"`python -m tools.humaneval create`")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 ({e.reason})") from None
    data = jsonl.loads(text, path, InputError)
    check(data, path)
    return Session(folder, data)
