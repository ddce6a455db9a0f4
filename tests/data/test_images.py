"""data/images.py: decoding gives Pillow's own pixels, however the bytes reach the decoder."""

import io

import numpy as np
import pytest
from PIL import Image

from data import images


def _jpeg(width, height, quality=95):
    """A JPEG of noise and gradients, larger than Pillow's 64 KiB read block."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 // width, y * 255 // height, (x + y) % 256], -1)
    pixels = np.clip(pixels + rng.integers(-40, 40, pixels.shape), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=quality)
    return out.getvalue()


def _pillow_default(data, size, reduce):
    """Pillow's decode as a plain `Image.open(...).convert("RGB")`: fed in 64 KiB blocks."""
    image = Image.open(io.BytesIO(data))
    if reduce:
        image.draft("RGB", (size, size))
    return np.asarray(image.convert("RGB").resize((size, size), Image.BILINEAR))


@pytest.mark.parametrize("size", [224, 480])  # At a reduced DCT scale, and in full.
def test_decode_pixels_equals_pillows_block_by_block_decode(size):
    data = _jpeg(640, 480)
    assert len(data) > 3 * 65536  # Several of Pillow's blocks.
    np.testing.assert_array_equal(images.decode_pixels(data, size),
                                  _pillow_default(data, size, reduce=True))


def test_a_truncated_jpeg_is_an_error_naming_it():
    data = _jpeg(640, 480)
    with pytest.raises(images.ImageError, match="cannot decode image key 7"):
        images.decode_pixels(data[:len(data) // 2], 224, name="key 7")
