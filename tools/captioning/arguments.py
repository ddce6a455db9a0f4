"""The captioning command lines' parser (usage errors as one `error: ...` line), and their
end: once the work is written, a late Ctrl-C or SIGTERM no longer fails the run."""

import argparse
import signal

import errors


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one `error: ...` line and exit status 2."""

    def error(self, message):
        errors.fail(f"{self.prog}: {message}")


def finished(own_process):
    """The work is done and written: when the command is the process's own (`own_process`),
    Ctrl-C and SIGTERM are ignored from now on, so one landing while it exits leaves status 0
    (as train.py's finished stage), not 130 or a death by the signal."""
    if own_process:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
