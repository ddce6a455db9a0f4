"""The one exception for bad VIFIDEL input: label files, vector files, stop-word lists, flags.

The command line prints it as a single `error: ...` line and exits with status 2; its message
names the file, line, key or value at fault.
"""


class InputError(ValueError):
    """Bad input from a user: a file, a line of it, a flag or a configuration field."""
