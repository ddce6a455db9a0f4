"""The kit's texts and their translation files (tools/humaneval/texts.py)."""

import json

import pytest

from errors import InputError
from tools.humaneval import __main__ as cli
from tools.humaneval import texts


def _file(tmp_path, content):
    path = tmp_path / "t.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def test_a_translation_over_english(tmp_path):
    data, missing = texts.read_translation(
        _file(tmp_path, {"progress": "Élément {n} sur {total}", "submit": "Envoyer"}), "fr")
    assert data == {"progress": "Élément {n} sur {total}", "submit": "Envoyer"}
    assert "progress" not in missing and "retry" in missing and "consent.text" not in missing
    ui = texts.Wording("fr", data, "Oui.")
    assert ui("progress", n=2, total=9) == "Élément 2 sur 9"
    assert ui("continue") == texts.ENGLISH["continue"]  # untranslated: English
    assert ui("consent.text") == "Oui." and texts.Wording("ar").dir == "rtl"


@pytest.mark.parametrize("content, message", [
    ({"progres": "x"}, "key 'progres': not a key of the kit's texts"),
    ({"progress": 3}, "key 'progress': expected a string"),
    ({"progress": "Item {n}"}, r"key 'progress': fields \['n'\] differ"),
    ({"progress": "Item {n} of {total"}, "key 'progress': .*write a brace"),
    ("[1, 2]", "expected a JSON object"),
    ('{"progress": ', r"t.json:1: not valid JSON"),
])
def test_bad_translation_files(tmp_path, content, message):
    with pytest.raises(InputError, match=message):
        texts.read_translation(_file(tmp_path, content), "fr")


def test_english_file_to_start_from(tmp_path):
    out = str(tmp_path / "en.json")
    cli.main(["texts", "--out", out])
    data, missing = texts.read_translation(out, "en")
    assert data == texts.ENGLISH and missing == []


def test_quoted_captions_keep_their_language():
    # Quoted captions keep their language.
    html = texts.Wording().quoting("guide.quality.example", "ar", "rtl", own="<b>x</b>", other="y")
    assert '«<bdi lang="ar" dir="rtl">&lt;b&gt;x&lt;/b&gt;</bdi>»' in html
