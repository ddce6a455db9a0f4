"""The one exception for bad user input in the human-evaluation tools.

The command line prints it as a single `error: ...` line and exits with status 2; the web app
answers it with an HTTP 4xx and the message. Its message always names the file, line, key or
value at fault.
"""


class InputError(ValueError):
    """Bad input from a user: a file, a flag, a form field or a token."""
