"""The CIDEr command line (python -m tools.cider) and its file readers, on files made here."""

import json
import subprocess
import sys

import numpy as np
import pytest
from pycocoevalcap.cider.cider import Cider

import errors
from data.releases import xm3600 as xm3600_release
from evaluation import cider
from formats import predictions
from tests.formats.small_files import write_lines
from tools import cider as cider_main

REFS = {
    "img0": {"en": ["A dog runs on the beach.", "A brown dog running."],
             "es": ["Un perro corre en la playa."]},
    "img1": {"en": ["Two cats sleep on a sofa!", "Cats sleeping."],
             "es": ["Dos gatos duermen."]},
    "img2": {"en": ["A red car parked on a street.", "A car."]},
}
PREDS = [
    {"image/key": "img0", "lang": "en", "caption": "A dog running on the beach"},
    {"image/key": "img1", "lang": "en", "caption": "two cats on a sofa"},
    {"image/key": "img2", "lang": "en", "caption": "a red car"},
    {"image/key": "img0", "lang": "es", "caption": "un perro en la playa"},
    {"image/key": "img1", "lang": "es", "caption": "dos gatos"},
]


def write_references(path, refs=REFS):
    with open(path, "w", encoding="utf-8") as f:
        for key, by_lang in refs.items():
            line = {"image/key": key, "image/locale": "en"}
            for lang, captions in by_lang.items():
                line[lang] = {"caption": captions, "caption/tokenized": captions,
                              "caption/tokenized/lowercase": [c.lower() for c in captions]}
            f.write(json.dumps(line) + "\n")
    return str(path)


@pytest.fixture
def files(tmp_path):
    return (write_references(tmp_path / "captions.jsonl"),
            write_lines(tmp_path / "preds.jsonl", PREDS))


def run(capsys, *argv):
    status = cider_main.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def expected_scores(lang):
    from evaluation.cider import text
    keys = [k for k in REFS if lang in REFS[k]]
    gts = {k: [" ".join(text.normalize(c, lang)) for c in REFS[k][lang]] for k in keys}
    res = {p["image/key"]: [" ".join(text.normalize(p["caption"], lang))]
           for p in PREDS if p["lang"] == lang}
    corpus, per_image = Cider().compute_score(gts, res)
    return corpus, dict(zip(keys, per_image, strict=True))


def test_json_output_matches_pycocoevalcap(files, capsys):
    status, out, err = run(capsys, "--references", files[0], "--predictions", files[1], "--json")
    assert status == 0, err
    result = json.loads(out)
    assert set(result) == {"metric", "scores", "average", "num_images"}
    assert result["metric"] == "cider-d"
    assert result["num_images"] == {"en": 3, "es": 2}
    for lang in ("en", "es"):
        assert result["scores"][lang] == pytest.approx(expected_scores(lang)[0], abs=1e-6)
    assert result["average"] == pytest.approx(np.mean(list(result["scores"].values())))


def test_table_output_has_the_languages_asked_for(files, capsys):
    status, out, _ = run(capsys, "--references", files[0], "--predictions", files[1],
                         "--langs", "es", "--metric", "cider")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == ["lang", "images", "CIDEr"]
    assert lines[1].split()[:2] == ["es", "2"]
    assert lines[2].startswith("average")
    assert len(lines) == 3


def test_per_image_file(files, capsys, tmp_path):
    out_path = tmp_path / "per_image.jsonl"
    status, _, _ = run(capsys, "--references", files[0], "--predictions", files[1],
                       "--per-image", str(out_path))
    assert status == 0
    rows = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [(r["lang"], r["image/key"]) for r in rows] == [
        ("en", "img0"), ("en", "img1"), ("en", "img2"), ("es", "img0"), ("es", "img1")]
    expected = expected_scores("en")[1]
    for r in rows[:3]:
        assert r["score"] == pytest.approx(expected[r["image/key"]], abs=1e-5)


def test_save_df_then_score_a_subset_with_it(files, capsys, tmp_path):
    df_path = tmp_path / "df.json"
    status, out, _ = run(capsys, "--references", files[0], "--predictions", files[1],
                         "--json", "--save-df", str(df_path))
    assert status == 0
    full = json.loads(out)
    saved = cider.load_document_frequencies(df_path)
    assert set(saved) == {"en", "es"} and saved["en"].num_images == 3
    # One image, scored with the df of all three, keeps its full-set score.
    only = write_lines(tmp_path / "one.jsonl", PREDS[:1])
    refs_one = write_references(tmp_path / "one_ref.jsonl", {"img0": REFS["img0"]})
    status, out, err = run(capsys, "--references", refs_one, "--predictions", only, "--json",
                           "--df", str(df_path))
    assert status == 0, err
    per_image = expected_scores("en")[1]
    assert json.loads(out)["scores"]["en"] == pytest.approx(per_image["img0"], abs=1e-6)
    assert full["scores"]["en"] == pytest.approx(np.mean(list(per_image.values())), abs=1e-6)


def test_allow_missing_scores_covered_images_with_full_df(files, capsys, tmp_path):
    preds = write_lines(tmp_path / "some.jsonl", PREDS[:2])
    status, _, err = run(capsys, "--references", files[0], "--predictions", preds)
    assert status == 2
    assert "1 of 3 images with 'en' references have no prediction" in err
    assert "'img2'" in err and "--allow-missing" in err
    status, out, err = run(capsys, "--references", files[0], "--predictions", preds, "--json",
                           "--allow-missing")
    assert status == 0
    assert "skipped 1" in err
    result = json.loads(out)
    assert result["num_images"] == {"en": 2}
    per_image = expected_scores("en")[1]
    assert result["scores"]["en"] == pytest.approx(
        (per_image["img0"] + per_image["img1"]) / 2, abs=1e-6)


@pytest.mark.parametrize("lines, message", [
    ([], "no predictions (the file is empty)"),
    (["{not json"], "preds.jsonl:1: not valid JSON"),
    # (Each malformed line: tests/formats/test_predictions.py.)
    ([{"image/key": "img0", "lang": "en"}], "preds.jsonl:1: missing field 'caption'"),
    (PREDS + [{"image/key": "nope", "lang": "en", "caption": "a"}],
     "preds.jsonl:6: prediction for image 'nope' ('en'), which is not in the references"),
    (PREDS + [{"image/key": "img2", "lang": "es", "caption": "a"}],
     "preds.jsonl:6: prediction for image 'img2' in 'es', which has no 'es' references"),
    (PREDS + [{"image/key": "img2", "lang": "fr", "caption": "a"}],
     "preds.jsonl:6: prediction for image 'img2' in 'fr', but the references have no 'fr' "
     "captions (field 'caption'); they have en, es"),
    (['{"image/key": "img0", "lang": "en", "caption": "a'],
     "preds.jsonl:1: not valid JSON (Invalid control character, column 50)"),
])
def test_bad_predictions(tmp_path, capsys, lines, message):
    refs = write_references(tmp_path / "captions.jsonl")
    preds = write_lines(tmp_path / "preds.jsonl", lines)
    status, out, err = run(capsys, "--references", refs, "--predictions", preds)
    assert status == 2
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err and out == ""


def test_a_missing_predictions_file_is_an_error(files, capsys, tmp_path):
    status, _, err = run(capsys, "--references", files[0], "--predictions",
                         str(tmp_path / "missing.jsonl"))
    assert status == 2 and "predictions file not found" in err


def test_a_missing_references_file_is_an_error(files, capsys, tmp_path):
    status, _, err = run(capsys, "--references", str(tmp_path / "nope.jsonl"),
                         "--predictions", files[1])
    assert status == 2 and "not found" in err


def test_a_malformed_references_file_is_named_with_its_line(files, capsys, tmp_path):
    bad_refs = write_lines(tmp_path / "bad_refs.jsonl", ['{"image/key": "a"}'])
    status, _, err = run(capsys, "--references", bad_refs, "--predictions", files[1])
    assert status == 2 and "bad_refs.jsonl:1" in err


def test_an_unknown_language_is_an_error(files, capsys):
    status, _, err = run(capsys, "--references", files[0], "--predictions", files[1],
                         "--langs", "en,zz")
    assert status == 2 and "unknown language 'zz'" in err


def test_a_language_the_references_lack_is_an_error(files, capsys):
    status, _, err = run(capsys, "--references", files[0], "--predictions", files[1],
                         "--langs", "fr")
    assert status == 2 and "the references have no 'fr' captions" in err


def test_a_df_file_of_another_format_is_an_error(files, capsys, tmp_path):
    bad_df = write_lines(tmp_path / "df.json", ['{"format": "something else"}'])
    status, _, err = run(capsys, "--references", files[0], "--predictions", files[1],
                         "--df", bad_df)
    assert status == 2 and "not a document frequency file" in err


def test_a_binary_predictions_file_is_named_with_its_line(files, capsys, tmp_path):
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'{"image/key": "img0", "lang": "en", "caption": "\xff"}\n')
    status, _, err = run(capsys, "--references", files[0], "--predictions", str(binary))
    assert status == 2 and "binary.jsonl:1: not UTF-8" in err


def test_df_file_validation(tmp_path):
    good = cider.DocumentFrequency("en", 4, {"a": 4, "a b": 1}, "NFKC")
    path = tmp_path / "df.json"
    good.save(path)
    assert cider.DocumentFrequency.load(path, "en") == good
    with pytest.raises(errors.InputError, match="no document frequencies for 'es'"):
        cider.DocumentFrequency.load(path, "es")
    for df, message in [
        ({"a": 5}, "count 5, expected an integer in 1..4"),
        ({"a  b": 1}, "not 1-4 tokens"),
        ({"a b c d e": 1}, "not 1-4 tokens"),
    ]:
        payload = json.loads(path.read_text())
        payload["languages"]["en"]["df"] = df
        path.write_text(json.dumps(payload))
        with pytest.raises(errors.InputError, match=message):
            cider.load_document_frequencies(path)
    path.write_text("{")
    with pytest.raises(errors.InputError, match="not valid JSON"):
        cider.load_document_frequencies(path)


def test_reference_field_tokenized(tmp_path, capsys):
    refs = {"img0": {"en": ["A dog."]}, "img1": {"en": ["A cat."]}}
    path = tmp_path / "captions.jsonl"
    with open(path, "w") as f:
        for key, by_lang in refs.items():
            f.write(json.dumps({"image/key": key, "image/locale": "en", "en": {
                "caption": by_lang["en"], "caption/tokenized": ["completely different"]}}) + "\n")
    preds = write_lines(tmp_path / "p.jsonl", [
        {"image/key": "img0", "lang": "en", "caption": "a dog"},
        {"image/key": "img1", "lang": "en", "caption": "a cat"}])
    _, out, _ = run(capsys, "--references", str(path), "--predictions", preds, "--json")
    _, out_tok, _ = run(capsys, "--references", str(path), "--predictions", preds, "--json",
                        "--reference-field", "caption/tokenized")
    assert json.loads(out)["scores"]["en"] > 0
    assert json.loads(out_tok)["scores"]["en"] == 0


def test_score_languages_from_references_table_or_records_with_their_df(files):
    preds = predictions.read(files[1])
    from_records = cider.score_languages(xm3600_release.read_captions(files[0]), preds)
    table = xm3600_release.read_references(files[0])
    from_table = cider.score_languages(table, preds, keep_scorers=False)
    assert list(from_table) == list(from_records) == ["en", "es"]
    for lang, result in from_table.items():
        assert result.score == from_records[lang].score
        assert result.keys == from_records[lang].keys
        assert result.scorer is None and from_records[lang].scorer is not None
    with pytest.raises(errors.InputError, match="field 'caption', not 'caption/tokenized'"):
        cider.score_languages(table, preds, reference_field="caption/tokenized")
    df = {"en": cider.CiderScorer([REFS[k]["en"] for k in REFS], "en").document_frequency}
    with pytest.raises(errors.InputError, match="no document frequencies for 'es'"):
        cider.score_languages(xm3600_release.read_captions(files[0]), preds, df=df)


def test_python_dash_m_runs_the_command(files):
    # `python -m tools.cider` runs tools/cider.py.
    done = subprocess.run(
        [sys.executable, "-m", "tools.cider", "--references", files[0],
         "--predictions", files[1], "--json", "--langs", "es"], capture_output=True, text=True,
        check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scores"]["es"] == pytest.approx(expected_scores("es")[0],
                                                                      abs=1e-6)


def test_its_own_process_loads_numba_without_its_blas_probe(files):
    # In a fresh process, as `python -m tools.cider` runs: numba loads without
    # importing scipy.linalg, and the import works again afterwards.
    script = (
        "import io, contextlib, sys\n"
        "from tools import cider as m\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    status = m.main(['--references', {files[0]!r}, '--predictions', {files[1]!r}],\n"
        "                    own_process=True)\n"
        "print(status, 'scipy.linalg' in sys.modules)\n"
        "import scipy.linalg.cython_blas\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "False"]


def test_every_kind_of_predictions_file_scores_the_same(files, capsys, tmp_path):
    from tests.formats.test_predictions import every_kind

    en = {p["image/key"]: p["caption"] for p in PREDS if p["lang"] == "en"}
    outputs = set()
    for path in every_kind(tmp_path, en).values():
        status, out, err = run(capsys, "--references", files[0], "--predictions", path,
                               "--langs", "en", "--json")
        assert status == 0, (path, err)
        outputs.add(out)
    assert len(outputs) == 1
    assert json.loads(out)["scores"]["en"] == pytest.approx(expected_scores("en")[0], abs=1e-6)


def _es_file(tmp_path):
    return write_lines(tmp_path / "es.jsonl", [p for p in PREDS if p["lang"] == "es"])


def test_two_files_one_per_language_are_read_as_the_file_of_both(files, capsys, tmp_path):
    from tests.formats.test_predictions import every_kind

    en = every_kind(tmp_path, {p["image/key"]: p["caption"] for p in PREDS if p["lang"] == "en"})
    es = _es_file(tmp_path)
    both = run(capsys, "--references", files[0], "--predictions", files[1], "--json")
    merged = run(capsys, "--references", files[0], "--predictions",
                 en["captioning.jsonl"], "--predictions", es, "--json")
    assert merged == both and both[0] == 0


def test_a_prediction_repeated_across_files_names_both_lines(files, capsys, tmp_path):
    es = _es_file(tmp_path)
    status, _, err = run(capsys, "--references", files[0], "--predictions", files[1],
                         "--predictions", es)
    assert status == 2 and err == (f"error: {es}:1: second prediction for image 'img0' in 'es' "
                                   f"(the first is at {files[1]}:4)\n")
