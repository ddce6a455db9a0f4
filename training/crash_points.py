"""A fault-injection hook for the tests: kill the trainer right after one of its writes.

Every write that changes what a resumed run finds in the workdir calls `passed(name)`
after it: a checkpoint committed (in checkpoints/ or checkpoints_best/), a metrics.jsonl
record appended, metrics.jsonl repaired, config.json replaced, a damaged checkpoint moved
aside. In a real run TRAIN_CRASH_AT is unset and `passed` returns at once.

With TRAIN_CRASH_AT=<n> the process writes `crash point <i>: <name>` on stderr at each of
them and SIGKILLs itself at the n-th (0: none, to list them), so that the workdir holds
exactly what a crash there leaves: the writes before it, and none after it (a checkpoint
saved in the background is waited for before its point counts).
tests/test_train_crash_points.py stops a run at each point in turn and resumes it.
"""

import os
import signal

_CRASH_AT = os.environ.get("TRAIN_CRASH_AT")
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
