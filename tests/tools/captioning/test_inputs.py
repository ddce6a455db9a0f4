"""tools/captioning/inputs.py: image arguments, and pixels of any image PIL reads equal to
data/images.read_pixels' of the same picture stored plainly (EXIF rotation, transparency, ...)."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from PIL import Image

from data import images as image_lib
from errors import InputError
from tests.tools.captioning.test_minimal_venv import REPO
from tools.captioning import inputs, run_exported

SIZE = 16


def _unit_pixels(path, size):
    """data/images' pixels of a file as the model sees them, in [-1, 1]."""
    return inputs.to_unit_range(image_lib.read_pixels(path, size))


def _picture(width=24, height=16):
    """An RGB picture with distinct corners, so that a rotation shows."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 255 // width, y * 255 // height, (x + y) % 256], -1).astype(np.uint8)


def _save(path, image, **kwargs):
    image.save(path, **kwargs)
    return str(path)


def test_plain_images_are_read_as_training_reads_them(tmp_path):
    for ext in ("jpg", "png", "bmp", "webp", "tiff", "gif"):
        path = _save(tmp_path / f"a.{ext}", Image.fromarray(_picture()).convert(
            "P" if ext == "gif" else "RGB"))
        np.testing.assert_array_equal(inputs.model_input(path, SIZE),
                                      _unit_pixels(path, SIZE), err_msg=ext)


def test_exif_orientation_is_applied(tmp_path):
    picture = Image.fromarray(_picture())
    upright = _save(tmp_path / "upright.png", picture)
    # Stored turned 90 degrees clockwise, with orientation 6 ("rotate 90 CW to view"):
    # a viewer, and the captioner, must see the upright picture.
    exif = Image.Exif()
    exif[0x0112] = 6
    stored = _save(tmp_path / "stored.png", picture.transpose(Image.Transpose.ROTATE_90),
                   exif=exif.tobytes())
    np.testing.assert_array_equal(inputs.model_input(stored, SIZE), _unit_pixels(upright, SIZE))
    # Training keeps the stored pixels.
    assert not np.array_equal(_unit_pixels(stored, SIZE), _unit_pixels(upright, SIZE))


def test_transparency_is_composited_onto_white(tmp_path):
    rgba = np.zeros((16, 16, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = np.linspace(0, 255, 16).astype(np.uint8)[None, :]  # transparent to opaque
    path = _save(tmp_path / "alpha.png", Image.fromarray(rgba, "RGBA"))
    alpha = rgba[..., 3:] / 255.0
    by_hand = np.round(rgba[..., :3] * alpha + 255 * (1 - alpha)).astype(np.uint8)
    plain = _save(tmp_path / "by_hand.png", Image.fromarray(by_hand))
    np.testing.assert_allclose(inputs.model_input(path, SIZE), _unit_pixels(plain, SIZE),
                               atol=2.5 / 255)
    # A fully transparent corner is white (1.0), not the black under it.
    assert np.all(inputs.model_input(path, SIZE)[:, 0] > 0.95)


def _gray_as_rgb(tmp_path):
    """(16x16 grey ramp, the path of its RGB copy)."""
    gray = np.arange(256, dtype=np.uint8).reshape(16, 16)
    return gray, _save(tmp_path / "rgb.png", Image.fromarray(np.repeat(gray[..., None], 3, -1)))


def test_grayscale_images_read_as_rgb(tmp_path):
    gray, rgb_path = _gray_as_rgb(tmp_path)
    gray_path = _save(tmp_path / "gray.png", Image.fromarray(gray, "L"))
    np.testing.assert_array_equal(inputs.model_input(gray_path, SIZE), _unit_pixels(rgb_path, SIZE))


def test_16_bit_images_read_as_8_bit(tmp_path):
    gray, rgb_path = _gray_as_rgb(tmp_path)
    # 16 bits per pixel: 257 * v is v in 8 bits (PIL alone would clip it to white).
    wide = _save(tmp_path / "gray16.png", Image.fromarray(gray.astype(np.uint16) * 257))
    assert Image.open(wide).mode.startswith("I")
    np.testing.assert_array_equal(inputs.model_input(wide, SIZE), _unit_pixels(rgb_path, SIZE))


def test_cmyk_images_read_as_rgb(tmp_path):
    cmyk = Image.new("CMYK", (16, 16), (0, 255, 255, 0))  # pure red in print colours
    red = inputs.model_input(_save(tmp_path / "cmyk.tiff", cmyk), SIZE)
    np.testing.assert_allclose(red[..., 0], 1.0)
    np.testing.assert_allclose(red[..., 1:], -1.0)


def _jpeg(tmp_path):
    """(path, bytes) of a JPEG picture."""
    path = _save(tmp_path / "a.jpg", Image.fromarray(_picture()))
    with open(path, "rb") as f:
        return path, f.read()


def test_bytes_read_as_their_file(tmp_path):
    path, data = _jpeg(tmp_path)
    np.testing.assert_array_equal(inputs.model_input(data, SIZE), _unit_pixels(path, SIZE))


def test_a_missing_image_is_named(tmp_path):
    with pytest.raises(InputError, match=r"image file not found: .*missing\.jpg"):
        inputs.model_input(str(tmp_path / "missing.jpg"), SIZE)


def test_bytes_not_an_image_are_named():
    with pytest.raises(InputError, match=r"cannot decode image notes\.txt: not an image"):
        inputs.model_input(b"hello", SIZE, name="notes.txt")


def test_a_truncated_image_is_named(tmp_path):
    _, data = _jpeg(tmp_path)
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputError, match="cannot decode image .*truncated.jpg"):
        inputs.model_input(str(truncated), SIZE)


def _photos(tmp_path):
    """(folder, its a.PNG, b.jpg, deeper/c.webp) of a folder that also holds notes.txt."""
    folder = tmp_path / "photos"
    (folder / "deeper").mkdir(parents=True)
    for name in ("b.jpg", "a.PNG", "deeper/c.webp"):
        _save(folder / name, Image.fromarray(_picture()))
    (folder / "notes.txt").write_text("not an image")
    return folder, *(str(folder / n) for n in ("a.PNG", "b.jpg", "deeper/c.webp"))


def test_expand_a_folder_to_its_images(tmp_path):
    folder, a, b, _ = _photos(tmp_path)
    assert inputs.expand([str(folder)]) == [a, b]  # not recursive, images only


def test_expand_a_pattern(tmp_path):
    folder, _, _, c = _photos(tmp_path)
    assert inputs.expand([str(folder / "**" / "*.webp")]) == [c]


def test_expand_keeps_named_files_each_once(tmp_path):
    folder, a, b, _ = _photos(tmp_path)
    # Named files are kept as given (even a missing one: reading it decides), each once.
    missing = str(tmp_path / "missing.jpg")
    assert inputs.expand([b, str(folder), missing]) == [b, a, missing]


def test_expand_a_pattern_matching_nothing_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no file matches the pattern .*nothing"):
        inputs.expand([str(tmp_path / "nothing*.jpg")])


def test_expand_a_folder_without_images_is_an_error(tmp_path):
    folder, *_ = _photos(tmp_path)
    with pytest.raises(InputError, match="folder .*deeper/none has no image files"):
        os.mkdir(folder / "deeper" / "none")
        inputs.expand([str(folder / "deeper" / "none")])


def test_the_image_extensions():
    assert {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif"} <= inputs.image_extensions()
    assert ".txt" not in inputs.image_extensions()


def test_very_large_images_are_read_quietly_or_refused_in_one_line(tmp_path, monkeypatch):
    # PIL warns (with its own file and line) over MAX_IMAGE_PIXELS and refuses over twice
    # that; the limit lowered here so that a 24x16 picture (384 pixels) is "large".
    path = _save(tmp_path / "large.png", Image.fromarray(_picture()))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Any warning fails the test.
        pixels = inputs.model_input(path, SIZE)
        exported = run_exported.read_image(path, {"size": SIZE, "value_range": [-1.0, 1.0],
                                                  "jpeg_draft": True, "upright": True,
                                                  "background": [255, 255, 255]})
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    np.testing.assert_array_equal(pixels, inputs.model_input(path, SIZE))
    np.testing.assert_allclose(exported, pixels, atol=1e-6)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 150)
    with pytest.raises(InputError, match=r"cannot decode image .*large.png: Image size \(384 "
                                         r"pixels\) exceeds limit of 300 pixels"):
        inputs.model_input(path, SIZE)


def test_the_export_command_runs_without_a_runpy_warning():
    # A module that the package's __init__ imported would be run a second time as __main__.
    result = subprocess.run([sys.executable, "-W", "always", "-m", "tools.captioning.export",
                             "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stderr == ""


@pytest.mark.parametrize("kind, make", [("a FIFO \\(named pipe\\)", os.mkfifo),
                                        ("a folder", os.mkdir)])
def test_a_fifo_or_a_folder_as_an_image_says_what_it_is(tmp_path, kind, make):
    path = tmp_path / "picture.jpg"
    make(path)  # A FIFO opened would wait for a writer forever.
    with pytest.raises(InputError, match=rf"image {path} is {kind}, not a file$"):
        inputs.model_input(str(path), SIZE)
