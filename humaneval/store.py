"""The ratings database of a session: SQLite (stdlib sqlite3), one transaction per write.

`ratings.sqlite` lives next to session.json. Tables:

    meta(key, value)                       the session digest it belongs to, the schema version
    views(rater, item, first_shown)        when each rater first saw each item (for timing)
    ratings(id, rater, item, position, answer, shown_at, rated_at, seconds, source)
        UNIQUE (rater, item): a second rating of the same item is refused, never overwrites

The database runs in WAL mode with synchronous=FULL, and a rating's transaction is committed
before the web app answers the rater's browser: whatever was acknowledged survives the server
being killed at any moment (and a power cut). Every connection is short-lived and belongs to
one thread, so the multi-threaded server shares nothing but the file. `init` and `Store` are
for the commands that rate (the web app, the simulation); `read_ratings` for those that
only read (status, export, analysis): it opens the file read-only and changes nothing in it.
"""

import contextlib
import json
import os
import pathlib
import sqlite3
import time

from errors import InputError

SCHEMA_VERSION = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS views (
    rater TEXT NOT NULL, item TEXT NOT NULL, first_shown REAL NOT NULL,
    PRIMARY KEY (rater, item));
CREATE TABLE IF NOT EXISTS ratings (
    id INTEGER PRIMARY KEY,
    rater TEXT NOT NULL, item TEXT NOT NULL, position INTEGER NOT NULL,
    answer TEXT NOT NULL, shown_at REAL, rated_at REAL NOT NULL, seconds REAL,
    source TEXT NOT NULL,
    UNIQUE (rater, item));
"""


class DuplicateRating(InputError):
    """The rater already rated this item; the first rating is kept."""


def _connect(path):
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def init(path, session_digest):
    """Creates the database, or checks that an existing one belongs to this session.

    Args:
        path: the ratings.sqlite file.
        session_digest: the session file's digest.

    Raises:
        InputError: the file is not a ratings database, or holds the ratings of a session
            with another digest (session.json was replaced after ratings were collected).
    """
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
            stored = conn.execute(
                "SELECT value FROM meta WHERE key = 'session_digest'").fetchone()[0]
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path}: not a ratings database ({e})") from None
    _check_digest(path, stored, session_digest)


def _check_digest(path, stored, session_digest):
    if stored != session_digest:
        raise InputError(f"{path} holds the ratings of another session (digest {stored[:12]}, "
                         f"session.json has {session_digest[:12]}): session.json was replaced "
                         f"after ratings were collected")


def _rating(row):
    return dict(row, answer=json.loads(row["answer"]))


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
    if not os.path.exists(path):
        return []
    uri = pathlib.Path(path).resolve().as_uri() + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
            conn.row_factory = sqlite3.Row
            stored = conn.execute(
                "SELECT value FROM meta WHERE key = 'session_digest'").fetchone()
            _check_digest(path, stored[0] if stored else "(none)", session_digest)
            rows = conn.execute("SELECT * FROM ratings ORDER BY id").fetchall()
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path}: not a ratings database ({e})") from None
    return [_rating(row) for row in rows]


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

    def mark_shown(self, rater, item, now=None):
        """Records when `rater` first saw `item`; returns that time (seconds since the epoch)."""
        now = time.time() if now is None else now
        self.conn.execute("INSERT OR IGNORE INTO views VALUES (?, ?, ?)", (rater, item, now))
        return self.conn.execute("SELECT first_shown FROM views WHERE rater = ? AND item = ?",
                                 (rater, item)).fetchone()[0]

    def add_rating(self, rater, item, position, answer, source="web", now=None):
        """Stores one rating in its own transaction, committed on return.

        Args:
            rater: the rater's name.
            item: the item id.
            position: the item's 1-based place in the rater's order.
            answer: the checked answer (scales.check_answer), stored as JSON.
            source: "web" (a rater) or "simulated" (humaneval/simulate.py).
            now: the time of the rating (default: now).

        Returns:
            The seconds between the item's first view and the rating, or None.

        Raises:
            DuplicateRating: the rater already rated the item (nothing is changed).
        """
        now = time.time() if now is None else now
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if self.conn.execute("SELECT 1 FROM ratings WHERE rater = ? AND item = ?",
                                 (rater, item)).fetchone():
                raise DuplicateRating(f"rater {rater!r} already rated item {position}; the "
                                      f"first rating is kept")
            shown = self.conn.execute(
                "SELECT first_shown FROM views WHERE rater = ? AND item = ?",
                (rater, item)).fetchone()
            shown_at = shown[0] if shown else None
            seconds = None if shown_at is None else max(0.0, now - shown_at)
            self.conn.execute(
                "INSERT INTO ratings (rater, item, position, answer, shown_at, rated_at, "
                "seconds, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (rater, item, position, json.dumps(answer, sort_keys=True), shown_at, now,
                 seconds, source))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return seconds

    def rated_items(self, rater):
        """The set of item ids `rater` has rated."""
        return {row[0] for row in self.conn.execute(
            "SELECT item FROM ratings WHERE rater = ?", (rater,))}

    def rater_seconds(self, rater):
        """Total seconds `rater` spent on rated items (first view to rating)."""
        value = self.conn.execute("SELECT SUM(seconds) FROM ratings WHERE rater = ?",
                                  (rater,)).fetchone()[0]
        return value or 0.0

    def ratings(self):
        """Every rating, in the order stored: dicts with the columns and `answer` parsed."""
        rows = self.conn.execute("SELECT * FROM ratings ORDER BY id").fetchall()
        return [_rating(row) for row in rows]
