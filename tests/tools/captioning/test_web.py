"""The captioning page's server side (tools/captioning/web.py) with Flask's test client: its
choices, POST /caption against the API's captions, bad input answered 400 / 413."""

import io

import pytest

from tests.cli import error_line
from tools.captioning import Captioner, Decoding, web


@pytest.fixture(scope="module")
def client(captioner):
    return web.create_app(captioner).test_client()


def _post(client, image=None, name="photo.jpg", **form):
    data = dict(form)
    if image is not None:
        data["image"] = (io.BytesIO(image), name)
    return client.post("/caption", data=data, content_type="multipart/form-data")


def _bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_page_offers_the_models_choices(client, caption_run):
    page = client.get("/").get_data(as_text=True)
    for lang in ("en", "es", "hi", "zh"):
        assert f'name="langs" value="{lang}"' in page
    assert page.count("checked>") == 5  # the core four, and greedy
    for method in ("greedy", "beam", "sample"):
        assert f'name="decode" value="{method}"' in page
    assert f"step 4 of {caption_run}" in page


def test_an_image_over_the_limit_is_refused(client):
    answer = _post(client, b"\0" * (web.MAX_IMAGE_BYTES + 1), langs="en")
    assert answer.status_code == 413
    assert answer.get_json()["error"] == "the image is over 32 MiB"


def test_captions_are_the_apis(client, captioner, demo_images):
    image = _bytes(demo_images[0])
    langs = ("zh", "en", "es", "hi")
    answer = _post(client, image, langs=list(langs), decode="beam", beam_size="3", alpha="0.6")
    assert answer.status_code == 200
    body = answer.get_json()
    want = captioner.caption([("photo.jpg", image)], langs, Decoding("beam", beam_size=3))
    assert body["image"] == "photo.jpg"
    assert body["decoding"] == "beam search (3 beams, alpha 0.6)"
    assert body["captions"] == [{"lang": c.lang, "caption": c.text, "log_prob": c.log_prob}
                                for c in want]
    # Sampling takes its own settings.
    sampled = _post(client, image, langs=list(langs), decode="sample", temperature="0.8",
                    top_k="20", seed="2").get_json()
    want = captioner.caption([image], langs, Decoding("sample", temperature=0.8, top_k=20, seed=2))
    assert [c["caption"] for c in sampled["captions"]] == [c.text for c in want]


@pytest.mark.parametrize("form, image, message", [
    ({"langs": "en"}, None, "no image: choose or drop one"),
    ({}, "demo", "no language ticked"),
    ({"langs": "fr"}, "demo", "unknown language 'fr'; known: en, es, hi, zh"),
    ({"langs": "en"}, b"GIF89a broken", "cannot decode image photo.jpg"),
    ({"langs": "en", "decode": "beam", "beam_size": "four"}, "demo",
     "beam_size: expected an integer, got 'four'"),
    ({"langs": "en", "decode": "beam", "beam_size": "0"}, "demo",
     "beam_size: beam size must be an integer >= 1, got 0"),
    ({"langs": "en", "decode": "nucleus"}, "demo", "unknown decoding 'nucleus'"),
])
def test_bad_input_is_a_400_with_its_message(client, demo_images, form, image, message):
    if image == "demo":
        image = _bytes(demo_images[0])
    answer = _post(client, image, **form)
    assert answer.status_code == 400
    assert message in answer.get_json()["error"]


def test_an_exported_models_page_has_its_fixed_settings(exported, demo_images):
    client = web.create_app(Captioner.from_exported(exported)).test_client()
    page = client.get("/").get_data(as_text=True)
    assert "(as exported)" in page and 'value="3" readonly' in page
    answer = _post(client, _bytes(demo_images[0]), langs="en", decode="beam", beam_size="4")
    assert answer.status_code == 400 and "was exported with beam search (3 beams" in \
        answer.get_json()["error"]


@pytest.mark.parametrize("args, message", [
    (["--exported", "{tmp}/missing.npz"], "exported model {tmp}/missing.npz not found"),
    (["--exported", "{tmp}/missing.npz", "--step", "2"], "--step is a setting of --workdir"),
    (["--workdir", "{tmp}"], "{tmp} has no config.json"),
    (["--port", "80"], "one of the arguments --workdir --exported is required"),
])
def test_command_line_bad_input_is_one_error_line(args, message, tmp_path, capsys):
    err = error_line(capsys, web.main, [a.format(tmp=tmp_path) for a in args])
    assert message.format(tmp=tmp_path) in err


def test_every_field_the_page_posts_is_documented():
    import os
    import re
    folder = os.path.dirname(web.__file__)
    with open(os.path.join(folder, "templates", "page.html"), encoding="utf-8") as f:
        page = f.read()
    fields = set(re.findall(r'<(?:input|select|textarea)\b[^>]*\bname="([^"]+)"', page))
    with open(os.path.join(folder, "..", "..", "docs", "captioning.md"), encoding="utf-8") as f:
        docs = f.read()
    section = docs[docs.index("## The page"):]
    section = section[:section.index("\n## ", 4)]
    assert fields >= {"image", "langs", "decode"}
    assert [name for name in sorted(fields) if f"`{name}`" not in section] == []
