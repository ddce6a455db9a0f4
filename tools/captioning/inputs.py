"""The images to caption: command-line arguments as files, and one image as the model's input.

`model_input` is the one place where the captioning tools turn an image into pixels
(through data/images.py, as training does, plus the EXIF orientation); `expand` turns
files, folders and glob patterns into the list of files to caption.
"""

import glob
import os

from PIL import Image

from data import images as image_lib
from errors import InputError

_GLOB_CHARS = frozenset("*?[")


def image_extensions():
    """File name endings of the formats this PIL reads (".jpg", ".png", ".webp", ...)."""
    return frozenset(ext for ext, fmt in Image.registered_extensions().items()
                     if fmt in Image.OPEN)


def expand(args):
    """The image files named by command-line arguments, in order, each once.

    Args:
        args: paths of files (any name: they are tried as images), folders (their
            files with an image extension, sorted; not recursive) and glob patterns
            (sorted matches; `**` matches folders recursively).

    Returns:
        A list of paths. A named file that does not exist is kept: reading it fails,
        and the caller skips it or stops (`--on_error`).

    Raises:
        InputError: a folder without images, or a pattern matching none.
    """
    extensions = image_extensions()
    files = []
    for arg in args:
        if os.path.isdir(arg):
            found = sorted(os.path.join(arg, name) for name in os.listdir(arg)
                           if os.path.splitext(name)[1].lower() in extensions
                           and os.path.isfile(os.path.join(arg, name)))
            if not found:
                raise InputError(f"folder {arg} has no image files (known endings: "
                                 f"{', '.join(sorted(extensions)[:12])}, ...)")
        elif not os.path.exists(arg) and _GLOB_CHARS & set(arg):
            found = sorted(p for p in glob.glob(arg, recursive=True) if os.path.isfile(p))
            if not found:
                raise InputError(f"no file matches the pattern {arg}")
        else:
            found = [arg]
        files += found
    return list(dict.fromkeys(files))


def model_input(image, size, name=None):
    """One image as the model's input: float32 [size, size, 3] in [-1, 1], upright RGB.

    Args:
        image: a path, or the encoded bytes of an image in any format PIL reads.
        size: the model's input side in pixels.
        name: what to call the image in errors (default: the path).

    Raises:
        InputError: the file is missing or unreadable, or not an image PIL decodes.
    """
    name = name or str(image)
    if isinstance(image, bytes):
        data = image
    else:
        try:
            with open(image, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise InputError(f"image file not found: {name}") from None
        except OSError as e:  # A folder, no permission, an I/O error.
            raise InputError(f"cannot read image {name}: {e.strerror or e}") from None
    try:
        return image_lib.decode(data, size, name=name, upright=True)
    except image_lib.ImageError as e:
        raise InputError(str(e)) from None
