"""The ratings database of a session: SQLite (stdlib sqlite3), one transaction per write.

`ratings.sqlite` lives next to session.json. Tables:

    meta(key, value)                       the session digest it belongs to, the schema version
    views(rater, item, first_shown)        when each rater first saw each item (for timing)
    ratings(id, rater, item, position, answer, shown_at, rated_at, seconds, active_seconds,
            source)
        UNIQUE (rater, item): a second rating of the same item is refused, never overwrites;
        seconds: first view to rating (wall clock); active_seconds: the time the page was
        visible and in use, measured by the page (None without it); source "web" (a person)
        or "simulated" (tools/humaneval/simulate.py)
    steps(rater, step, at)                 the introduction a rater went through: "consent",
                                           "guidelines" (passed once, kept)
    practice(rater, item, answer, correct, at)   practice answers: never ratings, never in a
                                           result
    participants(rater, platform, participant, details, enrolled_at, last_seen, token)
        crowd enrolment: the rater slot a platform's participant holds, UNIQUE (platform,
        participant): one slot per participant, found again when they come back; `token`
        the secret of this participant's link to the slot (a new one for each enrolment, so
        that a slot given up and taken by someone else is out of the first one's reach)
    declined(platform, participant, at)    participants who did not consent (slot released)

The database runs in WAL mode with synchronous=FULL, and a rating's transaction is committed
before the web app answers the rater's browser: whatever was acknowledged survives the server
being killed at any moment (and a power cut). The file is created readable by its owner only
(0600; SQLite gives its -wal and -shm files the same mode): it holds the participants' platform
ids. Every connection is short-lived and belongs to one thread, so the multi-threaded server
shares nothing but the file. `init` and `Store` are for the commands that rate (the web app,
the simulation); `read_ratings` and `read_state` for those that only read (status, export,
analysis, the dashboard): they open the file read-only and change nothing in it.
"""

import contextlib
import json
import os
import pathlib
import secrets
import sqlite3
import time

from errors import InputError

SCHEMA_VERSION = "3"
SOURCES = ("web", "simulated")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS views (
    rater TEXT NOT NULL, item TEXT NOT NULL, first_shown REAL NOT NULL,
    PRIMARY KEY (rater, item));
CREATE TABLE IF NOT EXISTS ratings (
    id INTEGER PRIMARY KEY,
    rater TEXT NOT NULL, item TEXT NOT NULL, position INTEGER NOT NULL,
    answer TEXT NOT NULL, shown_at REAL, rated_at REAL NOT NULL, seconds REAL,
    active_seconds REAL, source TEXT NOT NULL,
    UNIQUE (rater, item));
CREATE TABLE IF NOT EXISTS steps (
    rater TEXT NOT NULL, step TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (rater, step));
CREATE TABLE IF NOT EXISTS practice (
    rater TEXT NOT NULL, item TEXT NOT NULL, answer TEXT NOT NULL, correct INTEGER NOT NULL,
    at REAL NOT NULL, PRIMARY KEY (rater, item));
CREATE TABLE IF NOT EXISTS participants (
    rater TEXT PRIMARY KEY, platform TEXT NOT NULL, participant TEXT NOT NULL,
    details TEXT NOT NULL, enrolled_at REAL NOT NULL, last_seen REAL NOT NULL,
    token TEXT NOT NULL UNIQUE, UNIQUE (platform, participant));
CREATE TABLE IF NOT EXISTS declined (
    platform TEXT NOT NULL, participant TEXT NOT NULL, at REAL NOT NULL);
"""


class DuplicateRating(InputError):
    """The rater already rated this item; the first rating is kept."""


def _connect(path):
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _create_private(path):
    """Creates `path` empty with mode 0600 unless it exists (SQLite then keeps the mode)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


def init(path, session_digest):
    """Creates the database, or checks that an existing one belongs to this session.

    Args:
        path: the ratings.sqlite file.
        session_digest: the session file's digest.

    Raises:
        InputError: the file is not a ratings database, holds the ratings of a session with
            another digest (session.json was replaced after ratings were collected), or was
            made by another version of the kit.
    """
    _create_private(path)
    try:
        with contextlib.closing(_connect(path)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            # One statement at a time: executescript would commit the transaction first.
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('session_digest', ?)",
                         (session_digest,))
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path}: not a ratings database ({e})") from None
    _check_meta(path, stored, session_digest)


def _check_meta(path, meta, session_digest):
    stored = meta.get("session_digest", "(none)")
    if stored != session_digest:
        raise InputError(f"{path} holds the ratings of another session (digest {stored[:12]}, "
                         f"session.json has {session_digest[:12]}): session.json was replaced "
                         f"after ratings were collected")
    if meta.get("schema") != SCHEMA_VERSION:
        raise InputError(f"{path}: ratings database of schema {meta.get('schema')!r}, this kit "
                         f"reads schema {SCHEMA_VERSION!r}: made by another version of the kit")


def _rating(row):
    return dict(row, answer=json.loads(row["answer"]))


@contextlib.contextmanager
def _read_only(path, session_digest):
    """A read-only connection (SQLite's `mode=ro`) after the digest check, or None when no
    database exists yet (nobody has rated)."""
    if not os.path.exists(path):
        yield None
        return
    uri = pathlib.Path(path).resolve().as_uri() + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
            conn.row_factory = sqlite3.Row
            _check_meta(path, dict(conn.execute("SELECT key, value FROM meta").fetchall()),
                        session_digest)
            yield conn
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path}: not a ratings database ({e})") from None


def read_ratings(path, session_digest):
    """Every stored rating, in the order stored, read without changing the database.

    The file is opened read-only (SQLite's `mode=ro`): no table is created, its journal mode
    stays as it is, nothing is written to it.

    Args:
        path: the ratings.sqlite file.
        session_digest: the session file's digest.

    Returns:
        Dicts with the columns of `ratings` and `answer` parsed; [] when no database exists
        yet (nobody has rated).

    Raises:
        InputError: the file is not a ratings database, or holds the ratings of a session
            with another digest.
    """
    with _read_only(path, session_digest) as conn:
        if conn is None:
            return []
        rows = conn.execute("SELECT * FROM ratings ORDER BY id").fetchall()
    return [_rating(row) for row in rows]


def read_state(path, session_digest):
    """Everything but the ratings, read-only (for the dashboard): steps, practice answers,
    participants and declines.

    Returns:
        {"steps": {rater: {step: time}}, "practice": {rater: [{"item", "correct", "at"}]},
        "participants": {rater: {"platform", "participant", "details", "enrolled_at",
        "last_seen"}}, "declined": count}; empty when no database exists yet.
    """
    state = {"steps": {}, "practice": {}, "participants": {}, "declined": 0}
    with _read_only(path, session_digest) as conn:
        if conn is None:
            return state
        for row in conn.execute("SELECT rater, step, at FROM steps"):
            state["steps"].setdefault(row["rater"], {})[row["step"]] = row["at"]
        for row in conn.execute("SELECT rater, item, correct, at FROM practice ORDER BY at"):
            state["practice"].setdefault(row["rater"], []).append(
                {"item": row["item"], "correct": bool(row["correct"]), "at": row["at"]})
        for row in conn.execute("SELECT * FROM participants"):
            state["participants"][row["rater"]] = {
                **{k: row[k] for k in row.keys() if k != "token"},  # the link's secret stays
                "details": json.loads(row["details"])}
        state["declined"] = conn.execute("SELECT COUNT(*) FROM declined").fetchone()[0]
    return state


class Store:
    """One connection to a session's ratings (open, use in one thread, close).

    Args:
        path: the ratings.sqlite file, created by `init`.
    """

    def __init__(self, path):
        self.path = path
        self.conn = _connect(path)

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextlib.contextmanager
    def _transaction(self):
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def mark_shown(self, rater, item, now=None):
        """Records when `rater` first saw `item`; returns that time (seconds since the epoch)."""
        now = time.time() if now is None else now
        self.conn.execute("INSERT OR IGNORE INTO views VALUES (?, ?, ?)", (rater, item, now))
        return self.conn.execute("SELECT first_shown FROM views WHERE rater = ? AND item = ?",
                                 (rater, item)).fetchone()[0]

    def add_rating(self, rater, item, position, answer, source="web", now=None,
                   active_seconds=None):
        """Stores one rating in its own transaction, committed on return.

        Args:
            rater: the rater's name.
            item: the item id.
            position: the item's 1-based place in the rater's order.
            answer: the checked answer (scales.check_answer), stored as JSON.
            source: "web" (a rater) or "simulated" (tools/humaneval/simulate.py).
            now: the time of the rating (default: now).
            active_seconds: the time the page was visible and in use, as the page measured
                it; kept at most the wall-clock seconds since the first view.

        Returns:
            (seconds, active_seconds) stored: wall clock since the first view, and active
            time; either None when unknown.

        Raises:
            DuplicateRating: the rater already rated the item (nothing is changed).
        """
        if source not in SOURCES:
            raise InputError(f"unknown rating source {source!r}; known: {', '.join(SOURCES)}")
        now = time.time() if now is None else now
        with self._transaction():
            if self.conn.execute("SELECT 1 FROM ratings WHERE rater = ? AND item = ?",
                                 (rater, item)).fetchone():
                raise DuplicateRating(f"rater {rater!r} already rated item {position}; the "
                                      f"first rating is kept")
            shown = self.conn.execute(
                "SELECT first_shown FROM views WHERE rater = ? AND item = ?",
                (rater, item)).fetchone()
            shown_at = shown[0] if shown else None
            seconds = None if shown_at is None else max(0.0, now - shown_at)
            if active_seconds is not None and seconds is not None:
                active_seconds = min(active_seconds, seconds)
            self.conn.execute(
                "INSERT INTO ratings (rater, item, position, answer, shown_at, rated_at, "
                "seconds, active_seconds, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rater, item, position, json.dumps(answer, sort_keys=True), shown_at, now,
                 seconds, active_seconds, source))
        return seconds, active_seconds

    def rated_items(self, rater):
        """The set of item ids `rater` has rated."""
        return {row[0] for row in self.conn.execute(
            "SELECT item FROM ratings WHERE rater = ?", (rater,))}

    def rater_seconds(self, rater):
        """Total active seconds `rater` spent on rated items (the wall-clock seconds of a
        rating without a measured active time)."""
        value = self.conn.execute(
            "SELECT SUM(COALESCE(active_seconds, seconds)) FROM ratings WHERE rater = ?",
            (rater,)).fetchone()[0]
        return value or 0.0

    def people(self):
        """{rater: what a person did under it}: raters with a participant, an introduction
        step, a practice answer, an item shown or a rating from the web: every rater whose
        link a person has opened past the consent."""
        out = {}
        for what, query in (("enrolled", "SELECT rater FROM participants"),
                            ("introduction", "SELECT rater FROM steps UNION "
                                             "SELECT rater FROM practice"),
                            ("item shown", "SELECT rater FROM views"),
                            ("rated", "SELECT rater FROM ratings WHERE source = 'web'")):
            for rater in {row[0] for row in self.conn.execute(query)}:
                out.setdefault(rater, []).append(what)
        return out

    def count_by_source(self):
        """{source: number of ratings}."""
        return dict(self.conn.execute("SELECT source, COUNT(*) FROM ratings GROUP BY source")
                    .fetchall())

    def ratings(self):
        """Every rating, in the order stored: dicts with the columns and `answer` parsed."""
        rows = self.conn.execute("SELECT * FROM ratings ORDER BY id").fetchall()
        return [_rating(row) for row in rows]

    # The introduction: consent, guidelines, practice.

    def steps(self, rater):
        """{step: time} of the introduction steps `rater` passed."""
        return dict(self.conn.execute("SELECT step, at FROM steps WHERE rater = ?",
                                      (rater,)).fetchall())

    def pass_step(self, rater, step, now=None):
        """Records that `rater` passed `step` (the first time counts)."""
        self.conn.execute("INSERT OR IGNORE INTO steps VALUES (?, ?, ?)",
                          (rater, step, time.time() if now is None else now))

    def practice_answers(self, rater):
        """{practice item id: (answer, correct)} of `rater`."""
        return {row["item"]: (json.loads(row["answer"]), bool(row["correct"]))
                for row in self.conn.execute(
                    "SELECT item, answer, correct FROM practice WHERE rater = ?", (rater,))}

    def add_practice(self, rater, item, answer, correct, now=None):
        """Stores a practice answer; a second answer to the same item is ignored (the first
        one's feedback stands). Returns the stored (answer, correct)."""
        self.conn.execute("INSERT OR IGNORE INTO practice VALUES (?, ?, ?, ?, ?)",
                          (rater, item, json.dumps(answer, sort_keys=True), int(correct),
                           time.time() if now is None else now))
        return self.practice_answers(rater)[item]

    # Crowd enrolment.

    def enrol(self, platform, participant, candidates, details, now=None):
        """The rater slot of a platform's participant: theirs if they have one, else the first
        free one of `candidates` (no participant, no rating, no step yet), in one transaction
        so that two participants arriving together never get the same slot.

        Args:
            platform: "prolific", "mturk" or "link".
            participant: the platform's participant id.
            candidates: rater names the participant may get, in order.
            details: what else the platform sent (study and session ids), stored as JSON.
            now: the time (default: now).

        Returns:
            (rater name, the token of the participant's link, True when newly enrolled);
            (None, None, False) when every slot is taken.
        """
        now = time.time() if now is None else now
        with self._transaction():
            row = self.conn.execute(
                "SELECT rater, token FROM participants WHERE platform = ? AND participant = ?",
                (platform, participant)).fetchone()
            if row is not None:
                self.conn.execute("UPDATE participants SET last_seen = ? WHERE rater = ?",
                                  (now, row[0]))
                return row[0], row[1], False
            used = {r[0] for r in self.conn.execute(
                "SELECT rater FROM participants UNION SELECT rater FROM ratings "
                "UNION SELECT rater FROM steps")}
            free = [name for name in candidates if name not in used]
            if not free:
                return None, None, False
            token = secrets.token_hex(16)
            self.conn.execute("INSERT INTO participants VALUES (?, ?, ?, ?, ?, ?, ?)",
                              (free[0], platform, participant,
                               json.dumps(details, sort_keys=True), now, now, token))
        return free[0], token, True

    def rater_of_token(self, token):
        """The rater slot whose participant's link has `token`, or None (never enrolled, or
        given up: declined)."""
        row = self.conn.execute("SELECT rater FROM participants WHERE token = ?",
                                (token,)).fetchone()
        return None if row is None else row[0]

    def participant(self, rater):
        """The participant record holding `rater`'s slot, or None."""
        row = self.conn.execute("SELECT * FROM participants WHERE rater = ?",
                                (rater,)).fetchone()
        return None if row is None else dict(row, details=json.loads(row["details"]))

    def decline(self, rater, now=None):
        """A participant who does not consent: the slot is freed for someone else (when
        nothing was rated under it) and the decline is counted; the participant's link dies
        with their record, before anyone else can get the slot. Returns True when freed."""
        now = time.time() if now is None else now
        with self._transaction():
            if self.conn.execute("SELECT 1 FROM ratings WHERE rater = ?", (rater,)).fetchone():
                return False
            row = self.conn.execute("SELECT platform, participant FROM participants "
                                    "WHERE rater = ?", (rater,)).fetchone()
            if row is not None:
                self.conn.execute("INSERT INTO declined VALUES (?, ?, ?)", (*row, now))
            for table in ("participants", "steps", "practice", "views"):
                self.conn.execute(f"DELETE FROM {table} WHERE rater = ?", (rater,))
        return True
