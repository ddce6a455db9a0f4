"""The project's one error hierarchy, and how a command line reports an error.

    Error                          raised on purpose, with a message meant for the user
    ├── InputError (ValueError)    a flag, value, file, line or key the user gave is wrong
    └── RunError (RuntimeError)    a run cannot start or go on (its state, not one input)

A command line prints an `Error` as one line, `error: <message>`, exit status 2 (`run_main`),
and no library's C++ log line unless `--verbosity` asks for them (`quiet_native_logs`).
"""

import contextlib
import importlib.abc
import importlib.machinery
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


@contextlib.contextmanager
def reraised(error_class, causes, prefix="", suffix=""):
    """Raises an error of `causes` in the block as `error_class`, its message between `prefix`
    and `suffix`: one `error:` line at the command line, not a library's traceback."""
    try:
        yield
    except causes as e:
        raise error_class(f"{prefix}{e}{suffix}") from None


def print_error(error):
    """Prints `error: <message>` as one line on stderr; returns the exit status (2)."""
    print(f"error: {error}", file=sys.stderr, flush=True)
    return EXIT_STATUS


def fail(error):
    """Prints `error: <message>` on stderr and exits with status 2 (raises `Exit`)."""
    print_error(error)
    raise Exit(str(error))


def asks_for_verbosity(argv):
    """True when the command line gives absl's `--verbosity` (or `-v`)."""
    return any(arg in ("-v", "--verbosity") or arg.startswith(("--verbosity=", "-v="))
               for arg in argv[1:])


def quiet_native_logs(argv=None):
    """Silences TensorFlow's C++ logs (CUDA probes, cloud credentials, CPU features) unless
    `argv` asks for `--verbosity`. Must run before TensorFlow loads: its level is read from the
    environment, and some lines are written while its libraries load, before any level applies,
    so its import runs with file descriptor 2 on /dev/null."""
    if asks_for_verbosity(sys.argv if argv is None else argv):
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # Over JAX's default of 1 (warnings on).
    if "tensorflow" not in sys.modules and not any(
            isinstance(finder, _SilentImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SilentImport())


class _SilentImport(importlib.abc.MetaPathFinder):
    """Loads TensorFlow with the process's stderr on /dev/null."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            load = spec.loader.exec_module

            def exec_module(module):
                if self in sys.meta_path:
                    sys.meta_path.remove(self)
                with _stderr_on_devnull():
                    load(module)

            spec.loader.exec_module = exec_module
        return spec


@contextlib.contextmanager
def _stderr_on_devnull():
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def run_main(main, *args):
    """Runs a command line's `main(*args)` and exits with its status, the same way everywhere.
    `Error`: one `error:` line, 2; Ctrl-C: `stopped (Ctrl-C)`, 130; a closed pipe: quietly, 0.
    The libraries' C++ logs are off unless `--verbosity` is given."""
    quiet_native_logs()
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
    except (BrokenPipeError, ValueError):
        # The interpreter flushes stdout again at exit; pointed at /dev/null that cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(status or 0)
