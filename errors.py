"""The project's one error hierarchy, and how a command line reports an error.

    Error                          raised on purpose, with a message meant for the user
    ├── InputError (ValueError)    a flag, value, file, line or key the user gave is wrong
    └── RunError (RuntimeError)    a run cannot start or go on (its state, not one input)

A command line prints an `Error` as one line, `error: <message>`, exit status 2 (`run_main`).
"""

import os
import sys

EXIT_STATUS = 2  # Of a command line that stopped on bad input.


class Error(Exception):
    """Raised on purpose, with a message for the user; the base every command line catches."""


class InputError(Error, ValueError):
    """Bad input from the user: a flag, value, file, line of it or key; the message names it."""


class RunError(Error, RuntimeError):
    """A run cannot start or go on; the message says why and what to do."""


class Exit(SystemExit):
    """The exit of a command line after its `error:` line: status 2, str() the message."""

    def __init__(self, message):
        super().__init__(EXIT_STATUS)
        self.message = message

    def __str__(self):
        return self.message


def print_error(error, stream=None):
    """Prints `error: <message>` as one line on stderr; returns the exit status (2)."""
    print(f"error: {error}", file=stream or sys.stderr, flush=True)
    return EXIT_STATUS


def fail(error):
    """Prints `error: <message>` on stderr and exits with status 2 (raises `Exit`)."""
    print_error(error)
    raise Exit(str(error))


def run_main(main, *args):
    """Runs a command line's `main(*args)` and exits with its status, the same way everywhere.
    `Error`: one `error:` line, 2; Ctrl-C: `stopped (Ctrl-C)`, 130; a closed pipe: quietly, 0."""
    try:
        status = main(*args)
    except Error as e:
        status = print_error(e)
    except KeyboardInterrupt:
        print("stopped (Ctrl-C)", file=sys.stderr, flush=True)
        status = 130
    except BrokenPipeError:
        status = 0
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    # The interpreter flushes stdout again at exit; pointed at /dev/null that cannot fail.
    if not _stdout_is_open():
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(status or 0)


def _stdout_is_open():
    try:
        sys.stdout.flush()
        return True
    except (BrokenPipeError, ValueError):
        return False
