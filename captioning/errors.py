"""The captioning tools' one kind of user error."""


class InputError(ValueError):
    """Bad input (an image, a language, a run folder, an exported file, a decoding).

    The message names what is at fault; the command line prints it as one `error: ...`
    line with exit status 2, the web page as the answer's message.
    """
