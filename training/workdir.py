"""A run's folder: created, checked writable, and held by one trainer at a time.

Two trainers on one workdir would interleave metrics and checkpoints, so process 0 holds an
exclusive `flock` on `<workdir>/.lock` for the run's life; the file names the holder (host,
pid, start time) for a second trainer's error. The kernel releases a flock however its
process ends (even SIGKILL), so a lock left by a gone process is free and is taken over.
Read-only tools take no lock.
"""

import datetime
import errno
import fcntl
import json
import os
import socket

import errors

LOCK_FILE = ".lock"


class WorkdirError(errors.RunError):
    """The workdir cannot be used: not writable, or held by another trainer."""


def prepare(workdir, process_index=0):
    """Creates `workdir` and checks that files can be written in it."""
    try:
        os.makedirs(workdir, exist_ok=True)
        probe = os.path.join(workdir, f".write_test_{process_index}")
        with open(probe, "w", encoding="utf-8"):
            pass
        os.remove(probe)
    except OSError as e:
        raise WorkdirError(f"--workdir {workdir}: cannot write there ({e.strerror})") from None


# The locks this process holds, by real path: a second lock() of the same workdir by the
# same process (an in-process caller retrying after an error) is the same holder.
_HELD = {}


def lock(workdir):
    """Takes the workdir's lock for this process, until `release` or the process's end.

    Returns a note when the lock was taken over from a gone process or the filesystem cannot
    lock (the run goes on unprotected), else None; WorkdirError names a live holder.
    """
    key = os.path.realpath(workdir)
    path = os.path.join(workdir, LOCK_FILE)
    if key in _HELD:
        if _same_file(_HELD[key], path):
            return None
        os.close(_HELD.pop(key))  # The workdir was replaced since: lock the new one.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise WorkdirError(f"--workdir {workdir}: cannot open its lock file {path} "
                           f"({e.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = _read_holder(fd)
        os.close(fd)
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):  # No locks on this filesystem.
            return (f"note: cannot lock {path} ({e.strerror}); nothing keeps a second "
                    f"trainer off this workdir")
        raise WorkdirError(
            f"--workdir {workdir} is in use by another trainer ({_describe(holder)}; lock "
            f"file {path}); wait for it to finish or stop it, or use another --workdir") \
            from None
    previous = _read_holder(fd)
    me = {"host": socket.gethostname(), "pid": os.getpid(),
          "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
    except OSError:
        pass  # A full disk, say: the flock still holds; a second trainer's error names nobody.
    _HELD[key] = fd
    if previous:
        return (f"note: {path} was left by a trainer that is no longer running "
                f"({_describe(previous)}); taking it over")
    return None


def release(workdir):
    """Releases the lock `lock` took (a no-op when this process holds none)."""
    fd = _HELD.pop(os.path.realpath(workdir), None)
    if fd is None:
        return
    try:
        os.ftruncate(fd, 0)  # Empty: nobody holds it. Not removed: see _read_holder.
    except OSError:
        pass
    os.close(fd)  # Releases the flock.


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
