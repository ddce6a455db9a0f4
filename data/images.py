"""Image decoding and preprocessing shared by training, evaluation and the captioning tools.

Images are decoded and resized on the host to uint8 [H, W, 3] (`decode_pixels`)
and go to the accelerator as such, a quarter of the bytes of float32; the
model maps them to float32 in [-1, 1] there (model/captioner.py), big_vision's
`value_range(-1, 1)`, with exactly the values of `to_unit_range` (`decode` gives
floats, for callers that want them on the host).
Large JPEGs are decoded at a reduced DCT scale (PIL's `draft`) when that still
leaves at least the target resolution: a 640x480 COCO image going to 224x224
decodes at 320x240, about three times faster, with the same antialiased result
as decoding in full and downscaling.

Any mode PIL reads becomes RGB (`to_rgb`): transparency is composited onto
white, 16-bit grayscale scaled to 8 bits, CMYK and palettes converted. Photos
from cameras and phones store their orientation in EXIF; `upright=True` turns
them as a viewer would (the captioning tools do; the datasets' loaders keep
the stored pixels, on which their annotations were made).
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
    """A PIL image of any mode as an RGB image.

    Args:
        image: an opened PIL image.
        upright: apply its EXIF orientation first.
    """
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


def decode(data, size, *, crop=None, name="image", upright=False):
    """Decodes image bytes into float32 [size, size, 3] in [-1, 1]; see `decode_pixels`."""
    return to_unit_range(decode_pixels(data, size, crop=crop, name=name, upright=upright))


def decode_pixels(data, size, *, crop=None, name="image", upright=False):
    """Decodes image bytes (any format PIL reads) into uint8 [size, size, 3].

    Args:
        data: the encoded image bytes.
        size: output side in pixels (images are resized to square, as big_vision's
            `resize(size)`; no aspect-preserving crop).
        crop: optional (top, left, height, width) as fractions of the image,
            applied before resizing (for augmentation).
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
        if image.format == "JPEG" and crop is None:
            image.draft("RGB", (size, size))
        image = to_rgb(image, upright=upright)
    except UnidentifiedImageError:
        raise ImageError(f"cannot decode image {name}: not an image in a format PIL "
                         f"reads") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageError(f"cannot decode image {name}: {e}") from None
    if crop is not None:
        top, left, height, width = crop
        w, h = image.size
        box = (round(left * w), round(top * h), round((left + width) * w),
               round((top + height) * h))
        image = image.crop(box)
    return np.asarray(image.resize((size, size), Image.BILINEAR))  # [size, size, 3]


def read(path, size, *, crop=None, name=None):
    """Reads and decodes an image file into float32 in [-1, 1]; see `read_pixels`."""
    return to_unit_range(read_pixels(path, size, crop=crop, name=name))


def read_pixels(path, size, *, crop=None, name=None):
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
    return decode_pixels(data, size, crop=crop, name=label)


def random_crop(rng, min_area=0.8, aspect_range=(0.9, 1.1)):
    """A random crop box (top, left, height, width) as fractions of the image.

    Mild on purpose: captions speak of sizes and left/right positions, which a
    strong crop (or a horizontal flip, which is never applied) would falsify.

    Args:
        rng: a numpy Generator.
        min_area: smallest fraction of the image area kept.
        aspect_range: range of the crop's width/height ratio (in image units).
    """
    area = rng.uniform(min_area, 1.0)
    aspect = np.exp(rng.uniform(np.log(aspect_range[0]), np.log(aspect_range[1])))
    height = min(1.0, np.sqrt(area / aspect))
    width = min(1.0, np.sqrt(area * aspect))
    top = rng.uniform(0.0, 1.0 - height)
    left = rng.uniform(0.0, 1.0 - width)
    return float(top), float(left), float(height), float(width)
