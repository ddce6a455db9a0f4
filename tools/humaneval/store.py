"""The ratings database of a session: SQLite (stdlib sqlite3), one transaction per write.

`ratings.sqlite` lives next to session.json. Tables:

    meta(key, value)                       the session digest, the schema version, "served"
    views(rater, item, first_shown)        when each rater first saw each item (for timing)
    ratings(id, rater, item, position, answer, shown_at, rated_at, seconds, active_seconds,
            source)
        UNIQUE (rater, item): a second rating of the same item is refused, never overwrites;
        seconds and active_seconds: below; source "web" or "simulated" (simulate.py)
    steps(rater, step, at)                 the introduction a rater went through: "consent",
                                           "guidelines" (passed once, kept)
    practice(rater, item, answer, correct, at)   practice answers: never ratings, never in a
                                           result
    participants(rater, platform, participant, details, enrolled_at, last_seen, token)
        crowd enrolment: the rater slot a platform's participant holds, UNIQUE (platform,
        participant): one slot per participant, found again when they come back; `token`
        the secret of this participant's link to the slot (a new one for each enrolment, so
        that a slot given up and taken by someone else is out of the first one's reach)
    declined(platform, participant, at)    participants who did not consent (slot released;
                                           counted once per participant)
    withdrawn_ratings(<ratings' columns>, withdrawn_at)   kept for the audit, never reported
    withdrawals(rater, platform, participant, ratings, at)   ("" "": a personal link, then dead)

A rating's `seconds` run from the item's first view to the rating; its `active_seconds` are
the page's measure of the time it was visible and in use, capped by what the server saw: the
time since the item was sent, or since the rater's previous rating when that came later (a
rater works on one item at a time), so no client can claim more time than it had; without
the page's measure they are that server time. The app refuses a rating of an item it never
sent to that rater (`shown`).

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

SCHEMA_VERSION = "4"
_UPGRADES = {"3": "4"}  # schema 4 only adds tables: `init` upgrades a schema-3 database
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
CREATE TABLE IF NOT EXISTS withdrawn_ratings (
    id INTEGER NOT NULL,
    rater TEXT NOT NULL, item TEXT NOT NULL, position INTEGER NOT NULL,
    answer TEXT NOT NULL, shown_at REAL, rated_at REAL NOT NULL, seconds REAL,
    active_seconds REAL, source TEXT NOT NULL, withdrawn_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS withdrawals (
    rater TEXT NOT NULL, platform TEXT NOT NULL, participant TEXT NOT NULL,
    ratings INTEGER NOT NULL, at REAL NOT NULL);
"""


class DuplicateRating(InputError):
    """The rater already rated this item; the first rating is kept."""


def _cannot_write(path, e):
    if isinstance(e, sqlite3.OperationalError):
        return InputError(f"{path}: cannot write the ratings database ({e}): is the disk full "
                          f"or the folder read-only? Free space and run the command again")
    return InputError(f"{path}: not a ratings database ({e})")


def _connect(path):
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _create_private(path):
    """Creates `path` empty with mode 0600 unless it exists (SQLite then keeps the mode);
    returns whether it did."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


def init(path, session_digest, served=False):
    """Creates the database, or checks that an existing one belongs to this session.

    Args:
        path: the ratings.sqlite file.
        session_digest: the session file's digest.
        served: the rating app is starting: the session is recorded as served (meta
            "served", the first time), which `simulate` respects.

    Raises:
        InputError: the file is not a ratings database, holds the ratings of a session with
            another digest (session.json was replaced after ratings were collected), or was
            made by another version of the kit.
    """
    created = _create_private(path)
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
            if served:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('served', ?)",
                             (str(time.time()),))
            for old, new in _UPGRADES.items():
                conn.execute("UPDATE meta SET value = ? WHERE key = 'schema' AND value = ?",
                             (new, old))
            stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        if created:  # never leave an empty file that later reads as a broken database
            for leftover in (path, path + "-wal", path + "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(leftover)
        raise _cannot_write(path, e) from None
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
    database exists yet (nobody has rated; an empty file is none either).

    A database in WAL mode needs its -shm file to be read; on a full disk SQLite cannot
    create it. When no -wal file holds anything, every committed rating is in the database
    file itself, which is then read as it is (`immutable=1`): reading needs no free byte."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        yield None
        return
    uri = pathlib.Path(path).resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
        try:
            meta = conn.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.OperationalError:
            conn.close()
            wal = path + "-wal"
            if os.path.exists(wal) and os.path.getsize(wal) > 0:
                raise
            conn = sqlite3.connect(uri + "&immutable=1", uri=True, timeout=30)
            meta = conn.execute("SELECT key, value FROM meta").fetchall()
        with contextlib.closing(conn):
            conn.row_factory = sqlite3.Row
            _check_meta(path, dict(meta), session_digest)
            yield conn
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path}: not a ratings database ({e})") from None


def read_ratings(path, session_digest):
    """Every stored rating, in the order stored, read without changing the database (SQLite's
    `mode=ro`): dicts with the columns of `ratings` and `answer` parsed; [] when no database
    exists yet. InputError: not a ratings database, or another session's."""
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
        "last_seen"}}, "declined": participants who declined, "withdrawn": withdrawals};
        empty when no database exists yet.
    """
    state = {"steps": {}, "practice": {}, "participants": {}, "declined": 0, "withdrawn": 0}
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
        state["declined"] = conn.execute("SELECT COUNT(*) FROM (SELECT DISTINCT platform, "
                                         "participant FROM declined)").fetchone()[0]
        state["withdrawn"] = conn.execute("SELECT COUNT(*) FROM withdrawals").fetchone()[0]
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
        """Records when `rater` first saw `item`; returns that time."""
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
                it; kept at most the server's time (the module docstring).

        Returns:
            (seconds, active_seconds) stored: wall clock since the first view, and active
            time; either None when unknown (a simulated rating).

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
            if seconds is not None:
                previous = self.conn.execute("SELECT MAX(rated_at) FROM ratings WHERE rater = ?",
                                             (rater,)).fetchone()[0]
                server = max(0.0, now - max(shown_at, previous or shown_at))
                active_seconds = server if active_seconds is None else min(active_seconds,
                                                                           server)
            self.conn.execute(
                "INSERT INTO ratings (rater, item, position, answer, shown_at, rated_at, "
                "seconds, active_seconds, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rater, item, position, json.dumps(answer, sort_keys=True), shown_at, now,
                 seconds, active_seconds, source))
        return seconds, active_seconds

    def shown(self, rater, item):
        """Whether `item` was ever sent to `rater` (mark_shown)."""
        return self.conn.execute("SELECT 1 FROM views WHERE rater = ? AND item = ?",
                                 (rater, item)).fetchone() is not None

    def served(self):
        """Whether the rating app was ever started on this database (init's `served`)."""
        return self.conn.execute("SELECT 1 FROM meta WHERE key = 'served'").fetchone() is not None

    def rated_items(self, rater):
        """The set of item ids `rater` has rated."""
        return {row[0] for row in self.conn.execute(
            "SELECT item FROM ratings WHERE rater = ?", (rater,))}

    def rater_seconds(self, rater):
        """Total active seconds `rater` spent on rated items (as stored: add_rating)."""
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
        """A rater who does not (or no longer) consent, in one transaction.

        Before any rating: the decline is counted (once per crowd participant) and the slot
        freed for someone else; a participant's link dies with their record, before anyone
        else can get the slot. After rating: a withdrawal. The ratings move to
        withdrawn_ratings (out of every report), the withdrawal is counted, the slot is freed
        and the link dies, a personal one too (`withdrawn`).

        Returns:
            The number of ratings withdrawn (0: a decline).
        """
        now = time.time() if now is None else now
        with self._transaction():
            count = self.conn.execute("SELECT COUNT(*) FROM ratings WHERE rater = ?",
                                      (rater,)).fetchone()[0]
            row = self.conn.execute("SELECT platform, participant FROM participants "
                                    "WHERE rater = ?", (rater,)).fetchone()
            if count:
                self.conn.execute("INSERT INTO withdrawn_ratings SELECT *, ? FROM ratings "
                                  "WHERE rater = ?", (now, rater))
                self.conn.execute("DELETE FROM ratings WHERE rater = ?", (rater,))
                self.conn.execute("INSERT INTO withdrawals VALUES (?, ?, ?, ?, ?)",
                                  (rater, *(row or ("", "")), count, now))
            elif row is not None:
                self.conn.execute("INSERT INTO declined VALUES (?, ?, ?)", (*row, now))
            for table in ("participants", "steps", "practice", "views"):
                self.conn.execute(f"DELETE FROM {table} WHERE rater = ?", (rater,))
        return count

    def withdrew(self, platform, participant):
        """Whether a crowd participant withdrew from the session (after rating). Withdrawal is
        final: they are not enrolled again (a decline, before any rating, is not)."""
        return self.conn.execute("SELECT 1 FROM withdrawals WHERE platform = ? AND participant "
                                 "= ?", (platform, participant)).fetchone() is not None

    def withdrawn(self, rater):
        """Whether `rater`'s personal link was withdrawn (it then reaches nothing)."""
        return self.conn.execute("SELECT 1 FROM withdrawals WHERE rater = ? AND platform = ''",
                                 (rater,)).fetchone() is not None
