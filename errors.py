"""The project's one error hierarchy, and how a command line reports an error.

    Error                          raised on purpose, with a message meant for the user
    ├── InputError (ValueError)    a flag, value, file, line or key the user gave is wrong
    └── RunError (RuntimeError)    a run cannot start or go on (its state, not one input)

Every error the code raises for the user derives from `Error`, so a command line catches
`Error` once and prints it as one line, `error: <message>`, with exit status 2 (`fail`).
The message names what is at fault: the flag, the file and line, the key, the value.

Subclasses live with the code that raises them, each naming a kind of input or failure:

- under `InputError`: `FormatError` (data/jsonl.py: a malformed JSON Lines file; its
  `DuplicateKeyError`: a key twice in one JSON object), `ImageError`
  (data/images.py), `CorruptImageError` (data/build/image_shards.py), `NotBuiltError`
  (data/build/layout.py: a dataset the config names is not built), `ConfigError`
  (training/run_config.py: a config field or override), `MetricsFileError`
  (training/metrics.py: a run's metrics.jsonl), `DecodingError` (model/decode.py: a decoding
  setting), `NormalizationError` (evaluation/cider/text.py), `UsageError`
  (evaluation/evaluate.py: a flag of the checkpoint tool), one class per file kind that tools
  exchange (formats/: `PredictionsError`, `PerImageError`, `ScoresError`, `EvalMetricsError`,
  `ThumbError`, `SideBySideError`), `ResultsError` (tools/analysis/compare.py: two results
  folders that do not pair), `MetaError` (tools/analysis/meta_scores.py: the
  meta-evaluation's own inputs), `DuplicateRating` (tools/humaneval/store.py), `Refused`
  (tools/humaneval/web.py: a rating-app request answered with a page in the rater's language);
- under `RunError`: `NotEnoughSpaceError` (data/build/builder.py), `TrainingError`
  (training/actions.py), `CheckpointError`, `IncompatibleCheckpoint` and `SaveError`
  (training/checkpointing.py), `WorkdirError` (training/workdir.py: a workdir not writable or
  held by another trainer), `SavedConfigError` (training/run_config.py: a run's config.json),
  `MetricsWriteError` (training/metrics.py: metrics.jsonl or the TensorBoard events),
  `ResultsNotWritten` (evaluation/evaluate.py: results that went to a fallback folder).

Code with no kind of its own (the CIDEr and VIFIDEL engines, the human-evaluation kit) raises
`InputError` itself.
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

    An `Error` is one `error:` line and status 2; Ctrl-C is one line, `stopped (Ctrl-C)`, and
    status 130; a reader that closed the pipe early (`... | head`) ends the command quietly
    with status 0, its remaining output dropped, and no traceback.
    """
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
