"""The captioning command lines' parser: usage errors as one `error: ...` line."""

import argparse

import errors


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one `error: ...` line and exit status 2."""

    def error(self, message):
        errors.fail(f"{self.prog}: {message}")
