"""The images to caption: command-line arguments as files, and one image as the model's input.

`model_input` is the one place where the captioning tools turn an image (a file, its bytes, a
PIL image or pixels) into the model's input (through data/images.py, as training does, plus
the EXIF orientation); `expand` turns files, folders and glob patterns into the list of files
to caption.
"""

import glob
import os
import warnings

import numpy as np
from PIL import Image

import files
from data import images as image_lib
from errors import InputError

_GLOB_CHARS = frozenset("*?[")


def to_unit_range(pixels):
    """uint8 pixels as float32 in [-1, 1]: x * (2 / 255) - 1, each step rounded to float32."""
    out = np.asarray(pixels).astype(np.float32)
    out *= 2.0 / 255.0  # In place: half the memory traffic of `x * a - b`.
    out -= 1.0
    return out


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
        image: a path; the encoded bytes of an image in any format PIL reads; a PIL image;
            or uint8 pixels [H, W] (gray), [H, W, 3] (RGB) or [H, W, 4] (RGBA).
        size: the model's input side in pixels.
        name: what to call the image in errors (default: the path).

    Raises:
        InputError: the file is missing or unreadable, or not an image PIL decodes.
    """
    name = name or str(image)
    with warnings.catch_warnings():
        # Over 89 megapixels PIL warns, with its own file and line; the pixels are read as any
        # others (over twice that, it refuses: an ImageError, one line).
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        if isinstance(image, np.ndarray):
            image = _from_array(image, name)
        if isinstance(image, Image.Image):
            rgb = image_lib.to_rgb(image, upright=True)
            return to_unit_range(np.asarray(rgb.resize((size, size), Image.BILINEAR)))
        try:
            return to_unit_range(
                image_lib.decode_pixels(_read(image, name), size, name=name, upright=True))
        except image_lib.ImageError as e:
            raise InputError(str(e)) from None


def _read(image, name):
    """The encoded bytes of a path or of bytes."""
    if isinstance(image, bytes):
        return image
    problem = files.not_a_file(image, "image")
    if problem:  # A FIFO would be waited on forever.
        raise InputError(problem)
    try:
        with open(image, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise InputError(f"image file not found: {name}") from None
    except OSError as e:  # A folder, no permission, an I/O error.
        raise InputError(f"cannot read image {name}: {e.strerror or e}") from None


def _from_array(pixels, name):
    """uint8 pixels [H, W], [H, W, 3] or [H, W, 4] as a PIL image (InputError otherwise)."""
    shape_ok = pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[-1] in (3, 4))
    if pixels.dtype != np.uint8 or not shape_ok or 0 in pixels.shape:
        raise InputError(f"{name}: expected uint8 pixels [H, W], [H, W, 3] or [H, W, 4], got "
                         f"{pixels.dtype} {list(pixels.shape)}")
    return Image.fromarray(pixels)
