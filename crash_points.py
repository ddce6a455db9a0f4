"""A fault-injection hook for the tests: kill a process right after one of its writes.

Each write that changes what a later run finds (the trainer's, a results folder's swap, a
workdir lock made again) calls `passed(name)` after it; with CRASH_AT=<n> each point prints
`crash point <i>: <name>` and the n-th SIGKILLs the process (0: none, to list them).
tests/test_train_crash_points.py kills at each in turn and checks that nothing is lost.
"""

import os
import signal

_CRASH_AT = os.environ.get("CRASH_AT")
_passed = [0]


def passed(name, finish=None):
    """Marks the write `name` as done; `finish` waits for it when it runs in the background."""
    if _CRASH_AT is None:
        return
    if finish is not None:
        finish()
    _passed[0] += 1
    os.write(2, f"crash point {_passed[0]}: {name}\n".encode())
    if _passed[0] == int(_CRASH_AT):
        os.kill(os.getpid(), signal.SIGKILL)
