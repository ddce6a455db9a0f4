"""The captioning tools' one kind of user error, and their command lines' parser."""

import argparse
import sys


class InputError(ValueError):
    """Bad input (an image, a language, a run folder, an exported file, a decoding).

    The message names what is at fault; the command lines print it as one `error: ...`
    line with exit status 2, the web page as the answer's message.
    """


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one `error: ...` line and exit status 2."""

    def error(self, message):
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)
