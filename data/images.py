"""Image decoding shared by training, evaluation and the captioning tools.

Images are decoded and resized on the host to uint8 [size, size, 3] (the model maps them to
[-1, 1]); JPEGs decode at a reduced DCT scale still covering the target size. EXIF orientation
is applied only with `upright=True` (the captioning tools): the datasets' annotations were made
on the stored pixels.
"""

import io

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

import errors


class ImageError(errors.InputError):
    """An image file could not be read or decoded."""


# Where transparent pixels show (a page's usual background).
BACKGROUND = (255, 255, 255)


def to_rgb(image, *, upright=False):
    """Any PIL image as RGB (transparency onto BACKGROUND), EXIF-turned if `upright`."""
    if upright:
        image = ImageOps.exif_transpose(image)
    if image.mode.startswith("I"):  # 16- or 32-bit integers: a 16-bit range, as PNG's.
        pixels = np.clip(np.asarray(image, np.float64), 0, 65535) / 257.0
        image = Image.fromarray(np.round(pixels).astype(np.uint8), "L")
    if image.mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, BACKGROUND + (255,)), rgba)
    if image.mode == "RGB":  # No copy (what `convert` would make).
        image.load()
        return image
    return image.convert("RGB")


def decode_pixels(data, size, *, name="image", upright=False):
    """Image bytes (any format PIL reads) -> uint8 [size, size, 3] (squashed, as big_vision).
    ImageError names `name` when the bytes are no decodable image."""
    try:
        image = Image.open(io.BytesIO(data))
        # The decoder gets the bytes in one call, not in 64 KiB blocks (each a suspension of
        # libjpeg and a copy of the rest): the same pixels for 2% less of an example's CPU.
        image.decodermaxblock = max(image.decodermaxblock, len(data))
        if image.format == "JPEG":
            image.draft("RGB", (size, size))
        image = to_rgb(image, upright=upright)
    except UnidentifiedImageError:
        raise ImageError(f"cannot decode image {name}: not an image in a format PIL "
                         f"reads") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageError(f"cannot decode image {name}: {e}") from None
    return np.asarray(image.resize((size, size), Image.BILINEAR))  # [size, size, 3]


def read_pixels(path, size, *, name=None):
    """`decode_pixels` of a file; FileNotFoundError names the path (and `name`)."""
    label = f"{name} ({path})" if name else path
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"image file not found: {label}") from None
    return decode_pixels(data, size, name=label)

