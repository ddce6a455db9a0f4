"""Image decoding shared by training, evaluation and the captioning tools.

Images are decoded and resized on the host to uint8 [size, size, 3] (`decode_pixels`) and go
to the accelerator as such, a quarter of float32's bytes; the model maps them to [-1, 1]
there (big_vision's `value_range(-1, 1)`), with exactly the values of `to_unit_range`.
A large JPEG is decoded at a reduced DCT scale (PIL's `draft`) that still covers the target
size: a 640x480 COCO image going to 224x224 decodes at 320x240, three times faster, with
the same antialiased result. Any mode PIL reads becomes RGB (`to_rgb`). Photos store their
orientation in EXIF; `upright=True` turns them as a viewer would (the captioning tools do;
the datasets' loaders keep the stored pixels, on which their annotations were made).
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
    """An opened PIL image of any mode as RGB (transparency composited onto BACKGROUND, 16-bit
    grayscale scaled to 8 bits, CMYK and palettes converted), turned by its EXIF first if
    `upright`."""
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


def to_unit_range(pixels):
    """uint8 pixels as float32 in [-1, 1]: x * (2 / 255) - 1, each step rounded to float32."""
    out = np.asarray(pixels).astype(np.float32)
    out *= 2.0 / 255.0  # In place: half the memory traffic of `x * a - b`.
    out -= 1.0
    return out


def decode_pixels(data, size, *, name="image", upright=False):
    """Decodes image bytes (any format PIL reads) into uint8 [size, size, 3].

    Args:
        data: the encoded image bytes.
        size: output side in pixels (images are resized to square, as big_vision's
            `resize(size)`; no aspect-preserving crop).
        name: what to call the image in errors (a key or a path).
        upright: apply the EXIF orientation (see the module docstring).

    Raises:
        ImageError: the bytes are not a decodable image; names `name`.
    """
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
    """Reads and decodes an image file into uint8 [size, size, 3]; see `decode_pixels`.

    Raises:
        FileNotFoundError: the file is missing (names the path, and `name` if given).
        ImageError: the file is not a decodable image.
    """
    label = f"{name} ({path})" if name else path
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"image file not found: {label}") from None
    return decode_pixels(data, size, name=label)

