"""A run's folder: created, checked writable, and held by one trainer at a time.

Process 0 holds an exclusive `flock` on `<workdir>/.lock`, which names it (host, pid, start
time, a token of this start), for the run's life; the kernel releases a flock however its
process ends, so a lock left by a gone process is taken over. The lock is a lease, renewed
every RENEW_S seconds by a thread and by `check` before every write of metrics or a checkpoint
(and before a background save is committed, training/checkpointing.py): a lock file removed by
hand is made again; one another trainer holds stops this one (WorkdirError) before it writes
more. A trainer that finds no lock file beside a metrics.jsonl waits WAIT_S for a live holder
to make it again. Read-only tools take no lock.
"""

import contextlib
import datetime
import errno
import fcntl
import json
import os
import re
import socket
import threading
import time
import uuid

import crash_points
import errors
from training import preemption

LOCK_FILE = ".lock"
RENEW_S = 5.0
WAIT_S = 3 * RENEW_S  # Beyond a holder's renewal, however busy its machine.
# Left by a kill inside files.replacing: removed once the lock is taken.
_STRAY_TMP = re.compile(r"\.(config\.json|metrics\.jsonl)\.[a-z0-9_]{8}\.tmp")


class WorkdirError(errors.RunError):
    """The workdir cannot be used: not writable, or held by another trainer."""


def check_usable(workdir):
    """What `prepare` and `lock` would refuse, found without writing: a file in the folder's
    place, a folder that cannot be written, a live holder of its lock."""
    if os.path.lexists(workdir) and not os.path.isdir(workdir):
        raise WorkdirError(f"--workdir {workdir}: cannot write there (it is a file, not a folder)")
    existing = workdir
    while not os.path.isdir(existing):
        existing = os.path.dirname(os.path.abspath(existing))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise WorkdirError(f"--workdir {workdir}: cannot write there (Permission denied)")
    path = os.path.join(workdir, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(workdir, _describe(_read_holder(fd))) from None
    except OSError:
        pass  # A filesystem without locks: the trainer goes on with a note.
    finally:
        os.close(fd)


def _in_use(workdir, holder):
    return WorkdirError(f"--workdir {workdir} is in use by another trainer ({holder}; lock file "
                        f"{os.path.join(workdir, LOCK_FILE)}); wait for it to finish or stop "
                        f"it, or use another --workdir")


def prepare(workdir, process_index=0):
    """Creates `workdir` and checks that files can be written in it."""
    if os.path.lexists(workdir) and not os.path.isdir(workdir):
        check_usable(workdir)  # Its one-line refusal.
    try:
        os.makedirs(workdir, exist_ok=True)
        probe = os.path.join(workdir, f".write_test_{process_index}")
        with open(probe, "w", encoding="utf-8"):
            pass
        os.remove(probe)
    except OSError as e:
        raise WorkdirError(f"--workdir {workdir}: cannot write there ({e.strerror})") from None


# The locks this process holds, by the workdir's real path: [path, fd, record, error]. A
# second lock() of the same workdir by the same process (an in-process retry) is the holder.
_HELD = {}
_MUTEX = threading.Lock()


def lock(workdir):
    """Takes the workdir's lock for this process, until `release` or the process's end.

    Returns a note when the lock was taken over from a gone process or the filesystem cannot
    lock (the run goes on unprotected), else None; WorkdirError names a live holder.
    """
    key = os.path.realpath(workdir)
    path = os.path.join(workdir, LOCK_FILE)
    with _MUTEX:
        if key in _HELD:
            if _same_file(_HELD[key][1], path):
                return None
            os.close(_HELD.pop(key)[1])  # The workdir was replaced since: lock the new one.
    deadline = time.monotonic() + WAIT_S
    while (not os.path.lexists(path) and os.path.exists(os.path.join(workdir, "metrics.jsonl"))
           and time.monotonic() < deadline):
        time.sleep(0.2)  # Removed by hand? A live holder makes it again within RENEW_S.
    me = {"host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex,
          "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    try:
        fd, previous = _take(path, me)
    except BlockingIOError as e:
        raise _in_use(workdir, e) from None
    if fd is None:
        return (f"note: cannot lock {path} ({previous}); nothing keeps a second trainer off "
                f"this workdir")
    with _MUTEX:
        _HELD[key] = [path, fd, me, None]
    preemption.before_exit_now(release_all)  # Ctrl-C exits at once before the first step.
    if _RENEWER.ident is None:
        _RENEWER.start()
    for name in os.listdir(workdir):
        if _STRAY_TMP.fullmatch(name):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(workdir, name))
    if previous:
        return (f"note: {path} was left by a trainer that is no longer running "
                f"({_describe(previous)}); taking it over")
    return None


def _take(path, me):
    """Opens and flocks `path`, writes `me` in it; returns (fd, the record it held), or
    (None, why) when the filesystem cannot lock; BlockingIOError(the holder) when held."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise WorkdirError(f"--workdir {os.path.dirname(path)}: cannot open its lock file "
                           f"{path} ({e.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = _read_holder(fd)
        os.close(fd)
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None, e.strerror
        raise BlockingIOError(_describe(holder)) from None
    previous = _read_holder(fd)
    _write_holder(fd, me)
    return fd, previous


def _write_holder(fd, me):
    # A full disk, say: the flock still holds; a second trainer's error names nobody.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)


def check(renew=True):
    """Confirms that every lock this process holds is still its own (renewing it now, else as
    the renewing thread last found it); WorkdirError when another trainer took one over."""
    with _MUTEX:
        for held in _HELD.values():
            if renew:
                _renew(held)
            if held[3]:
                raise WorkdirError(held[3])


def _renew(held):
    path, fd, me, error = held
    if error:
        return
    if _same_file(fd, path):  # Still flocked by this process: a record edited is rewritten.
        if _read_holder(fd) != me:
            _write_holder(fd, me)
        return
    try:
        new, _ = _take(path, me)  # Removed by hand: this lease goes on.
    except (BlockingIOError, WorkdirError) as e:
        held[3] = (f"{path} no longer names this trainer: another trainer ({e}) holds "
                   f"{os.path.dirname(path) or '.'} now; this one stopped without writing more")
        return
    if new is not None:
        held[1] = new
        os.close(fd)
        crash_points.passed(f"{LOCK_FILE} made again")


def _renew_forever():
    while True:
        time.sleep(RENEW_S)
        with contextlib.suppress(WorkdirError):  # Raised by the trainer's next `check`.
            check()


_RENEWER = threading.Thread(target=_renew_forever, name="workdir_lease", daemon=True)


def release(workdir):
    """Releases the lock `lock` took (a no-op when this process holds none)."""
    with _MUTEX:
        held = _HELD.pop(os.path.realpath(workdir), None)
    if held is None:
        return
    if not held[3]:
        with contextlib.suppress(OSError):  # Empty: nobody holds it. Not removed: _read_holder.
            os.ftruncate(held[1], 0)
    os.close(held[1])  # Releases the flock.


def release_all():
    """Releases every lock this process holds (an exit at once)."""
    for workdir in list(_HELD):
        release(workdir)


def _same_file(fd, path):
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def _read_holder(fd):
    """The holder's record in the lock file ({} when empty or unreadable). The file is never
    removed: a process that opened it before would lock a file nobody else sees."""
    try:
        data = os.pread(fd, 4096, 0)
        holder = json.loads(data.decode("utf-8")) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder):
    if not holder:
        return "holder unknown"
    return (f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, started "
            f"{holder.get('started', '?')}")
