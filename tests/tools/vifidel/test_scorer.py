"""Tests of VIFIDEL end to end: scorer, bags, the command line, and the demo's ranking."""

import json
import math

import numpy as np
import pytest

from data.releases import xm3600 as xm3600_release
from errors import InputError
from tests.formats.test_predictions import every_kind
from tests.tools.vifidel.conftest import write_vec
from tools import demo
from tools.vifidel import __main__ as cli
from tools.vifidel import bags, corpus, vectors
from tools.vifidel.scorer import VifidelScorer

C60, S60 = 0.5, math.sqrt(3) / 2


def _vectors(tmp_path, lang, table):
    return vectors.load_vectors(write_vec(tmp_path / f"{lang}.vec", list(table),
                                          list(table.values())), lang)


def test_hand_computed_reference_weighting(tmp_path):
    # 2-D space: "dog" = (1, 0), "frisbee" = (0, 1), "grass" at 60 degrees from dog; "a" and
    # "on" are unknown (counted, dropped). Vectors are stored as float32, hence 1e-6.
    v = _vectors(tmp_path, "en", {"dog": [1, 0], "frisbee": [0, 1], "grass": [C60, S60]})
    labels = [{"Dog": 1}]
    caption = ["a dog on a frisbee"]
    plain = VifidelScorer(labels, "en", v).score(caption)
    # Half the label's mass stays on "dog" (cost 0), half moves to "frisbee" (cost
    # ||(1, 0) - (0, 1)||^2 = 2, p = 2 as Eq. 1).
    assert plain.wmd[0] == pytest.approx(0.5 * 2, abs=1e-6)
    assert plain.per_image[0] == pytest.approx(math.exp(-1), abs=1e-6)
    assert plain.oov["captions"] == {"tokens": 5, "oov": 3, "rate": 0.6, "top": ["a", "on"]}
    # One reference mentioning only grass (Eq. 4): rho(dog) = (1 - cos 60) / 2 = 0.25,
    # rho(frisbee) = (1 - cos 30) / 2; c(dog, frisbee) = |(0.25, 0) - (0, rho_f)|^2.
    rho_f = (1 - S60) / 2
    weighted = VifidelScorer(labels, "en", v, references=[["grass"]]).score(caption)
    assert weighted.wmd[0] == pytest.approx(0.5 * (0.25 ** 2 + rho_f ** 2), abs=1e-6)
    # Two references, one mentioning the dog: the penalties are the means over both.
    both = VifidelScorer(labels, "en", v, references=[["grass", "a dog"]]).score(caption)
    rho_d, rho_f2 = (0.25 + 0) / 2, (rho_f + 0.5) / 2
    assert both.wmd[0] == pytest.approx(0.5 * (rho_d ** 2 + rho_f2 ** 2), abs=1e-6)
    # The authors' script's exponent (p = 1) and the former, unhalved penalty, as options.
    script = VifidelScorer(labels, "en", v, references=[["grass"]], cost_power=1,
                           penalty="clipped").score(caption)
    assert script.wmd[0] == pytest.approx(0.5 * math.hypot(0.5, 1 - S60), abs=1e-6)
    with pytest.raises(InputError, match="unknown penalty 'half'"):
        VifidelScorer(labels, "en", v, penalty="half")
    with pytest.raises(InputError, match="cost power must be 1 or 2, got 3"):
        VifidelScorer(labels, "en", v, cost_power=3)


def test_figure3_a_word_close_to_a_label_gains_when_the_references_mention_it(tmp_path):
    # The label "racket" and the caption word "tennis" are close (cos 0.8); "court" is
    # unrelated. References that mention tennis make the caption more faithful than
    # references that do not. With Eq. 4, references that mention nothing near (cosine 0)
    # still halve the vectors (rho = 1/2), so they score above the plain metric; the former
    # "clipped" penalty (rho = 1 there) leaves the plain cost.
    v = _vectors(tmp_path, "en", {"racket": [1, 0, 0], "tennis": [0.8, 0.6, 0],
                                  "court": [0, 0, 1], "cake": [0, 1, 0]})
    labels = [{"Racket": 1}]

    def score(refs, **kwargs):
        return VifidelScorer(labels, "en", v, references=refs, **kwargs).score(
            ["tennis"]).per_image[0]

    plain, mention, silent = score(None), score([["tennis court"]]), score([["court"]])
    assert mention > silent > plain
    # Plain cost ||r - t||^2 = 0.4; silent: ||(r - t) / 2||^2 = 0.1.
    assert -math.log(plain) == pytest.approx(0.4, abs=1e-6)
    assert -math.log(silent) == pytest.approx(0.1, abs=1e-6)
    assert score([["court"]], penalty="clipped") == pytest.approx(plain)
    # An unrelated caption word scores lower than the close one in every setting.
    for refs in (None, [["tennis court"]], [["court"]]):
        s = VifidelScorer(labels, "en", v, references=refs)
        assert s.score(["cake"]).per_image[0] < s.score(["tennis"]).per_image[0]


def test_english_labels_meet_chinese_captions_through_aligned_vectors(tmp_path):
    en = _vectors(tmp_path, "en", {"traffic_light": [1, 0, 0], "traffic": [0, 1, 0],
                                   "light": [0, 0, 1], "dog": [0.6, 0.8, 0]})
    zh = _vectors(tmp_path, "zh", {"红绿灯": [1, 0, 0], "狗": [0.6, 0.8, 0], "的": [0, 0, -1]})
    maker = bags.BagMaker(zh, "zh", stopwords={"的"})
    # Characters are joined back into the longest known words; stop words dropped; an
    # unknown character is counted.
    assert maker.caption_bags(["红绿灯的狗猫"]) == [{("红 绿 灯",): 1, ("狗",): 1}]
    assert maker.oov.oov == 1 and maker.oov.examples == {"猫": 1}
    # A phrase entry is used whole; otherwise "mean" keeps one unit, "split" one per word.
    label_maker = bags.BagMaker(en, "en")
    assert label_maker.label_bag({"Traffic light": 1}) == {("traffic light",): 1}
    assert label_maker.label_bag({"Light dog": 2}) == {("light", "dog"): 2}
    assert label_maker.label_bag({"Light dog": 2}, "split") == {("light",): 1, ("dog",): 1}
    scorer = VifidelScorer([{"Traffic light": 1}, {"Zebra": 1}], "zh", zh, label_vectors=en)
    result = scorer.score(["红绿灯", "狗"])
    assert result.per_image[0] == pytest.approx(1.0)
    assert np.isnan(result.per_image[1]) and scorer.num_unlabelled == 1
    assert result.corpus == pytest.approx(1.0)


def _settings(data_dir, **kwargs):
    return corpus.Settings(
        vectors=(f"{data_dir}/vectors/wiki.{{lang}}.align.vec",),
        labels=(f"{data_dir}/xm3600/*-annotations-human-imagelabels*.csv",),
        class_descriptions=f"{data_dir}/xm3600/oidv7-class-descriptions.csv", **kwargs)


@pytest.fixture(scope="module")
def demo100(tmp_path_factory):
    """The demo generator's held-out split at its full size (100 images), no TFDS."""
    out = tmp_path_factory.mktemp("demo100")
    demo.generate(str(out), seed=0, num_train=24, num_restval=0, num_val=2, num_test=0,
                  num_xm3600=100, image_size=16, build_tfds=False)
    return out


@pytest.mark.parametrize("use_references", [True, False])
def test_demo_own_caption_ranks_above_another_images_caption(demo100, use_references):
    records = xm3600_release.read_captions(str(demo100 / "xm3600" / "captions.jsonl"))
    keys, refs, captions = {}, {}, {}
    for lang in ("en", "es", "hi", "zh"):
        keys[lang], all_refs = xm3600_release.references(records, lang)
        # The caption is the first reference, the penalty uses the other one only.
        captions[lang] = [r[0] for r in all_refs]
        refs[lang] = [r[1:] for r in all_refs]
    scorers = corpus.build_scorers(keys, refs, _settings(demo100, use_references=use_references))
    for lang, scorer in scorers.items():
        share, compared = corpus.ranking_control(scorer, captions[lang])
        # Plain VIFIDEL knows colour and shape only (no Open Images label carries size or
        # position), and the English stop words hold big, small, left and right.
        assert compared >= 95 and share >= 0.93, (lang, share, compared)


def _predictions(data_dir, path, skip=0):
    records = xm3600_release.read_captions(str(data_dir / "xm3600" / "captions.jsonl"))
    with open(path, "w", encoding="utf-8") as f:
        for r in records[skip:]:
            for lang in ("en", "zh"):
                f.write(json.dumps({"image/key": r.key, "lang": lang,
                                    "caption": r.captions[lang][0]}, ensure_ascii=False) + "\n")
    return str(path)


def _argv(data_dir, predictions, *extra):
    return ["--references", str(data_dir / "xm3600" / "captions.jsonl"),
            "--predictions", predictions,
            "--labels", str(data_dir / "xm3600" / "*-annotations-human-imagelabels*.csv"),
            "--class-descriptions", str(data_dir / "xm3600" / "oidv7-class-descriptions.csv"),
            "--vectors", str(data_dir / "vectors" / "wiki.{lang}.align.vec"), *extra]


def test_command_line_table(tiny_demo, tmp_path, capsys):
    preds = _predictions(tiny_demo, tmp_path / "p.jsonl")
    assert cli.main(_argv(tiny_demo, preds, "--control")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["lang", "images", "VIFIDEL"] and lines[1].startswith("en")


def test_command_line_json_with_per_image_scores(tiny_demo, tmp_path, capsys):
    preds = _predictions(tiny_demo, tmp_path / "p.jsonl")
    out = tmp_path / "per_image.jsonl"
    assert cli.main(_argv(tiny_demo, preds, "--json", "--no-references", "--per-image",
                          str(out))) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["scores"]) == {"en", "zh"} and 0 < result["average"] < 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 16 and {r["lang"] for r in rows} == {"en", "zh"}


def _every_kind_in_english(tiny_demo, folder):
    records = xm3600_release.read_captions(str(tiny_demo / "xm3600" / "captions.jsonl"))
    return every_kind(folder, {r.key: r.captions["en"][0] for r in records})


def test_every_kind_of_predictions_file_reads_alike(tiny_demo, tmp_path, capsys):
    # Every kind of predictions file reads alike.
    outputs = set()
    for path in _every_kind_in_english(tiny_demo, tmp_path).values():
        assert cli.main(_argv(tiny_demo, path, "--langs", "en", "--json")) == 0, path
        outputs.add(capsys.readouterr().out)
    assert len(outputs) == 1


def test_two_files_one_per_language_score_as_the_file_of_both(tiny_demo, tmp_path, capsys):
    preds = _predictions(tiny_demo, tmp_path / "p.jsonl")
    _every_kind_in_english(tiny_demo, tmp_path)
    # Two files, one per language, score as the file of both.
    both = preds
    zh = tmp_path / "zh.jsonl"
    zh.write_text("".join(line for line in open(both, encoding="utf-8") if '"zh"' in line),
                  encoding="utf-8")
    assert cli.main(_argv(tiny_demo, both, "--json")) == 0
    expected = capsys.readouterr().out
    assert cli.main(_argv(tiny_demo, str(tmp_path / "captioning.jsonl"), "--predictions",
                          str(zh), "--json")) == 0
    assert capsys.readouterr().out == expected


def test_command_line_bad_input_is_one_error_line(tiny_demo, tmp_path, capsys):
    preds = _predictions(tiny_demo, tmp_path / "p.jsonl")
    other = tmp_path / "other.csv"
    other.write_text("ImageID,Source,LabelName,Confidence\n0123456789abcdef,v,/m/demo_red,1\n")
    bad_vec = tmp_path / "wiki.en.vec"
    bad_vec.write_text("2 3\nred 1 0 0\nblue 1 0\n")
    cases = [
        (["--labels", str(other)], r"other.csv: no label for any of the 8 images"),
        (["--langs", "en,fr"], r"no predictions for 'fr'"),
        (["--vectors", f"en={bad_vec}"], r"wiki.en.vec:3: word 'blue' has 2 values"),
        (["--max-words", "0"], r"--max-words must be positive"),
    ]
    for extra, message in cases:
        argv = _argv(tiny_demo, preds)
        for flag, value in zip(extra[::2], extra[1::2], strict=True):
            if flag in argv and flag in ("--labels",):
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        assert cli.main(argv) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err
        assert __import__("re").search(message, err[0]), (message, err[0])
    missing = _predictions(tiny_demo, tmp_path / "missing.jsonl", skip=1)
    assert cli.main(_argv(tiny_demo, missing)) == 2
    assert "1 of 8 images with 'en' references have no prediction" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"no word vectors for 'hi'"):
        vectors.load_languages([str(tiny_demo / "vectors" / "wiki.{lang}.vec")], ["hi"])
