"""Tests of formats/scores.py: scores.json made, written, read back, and its errors."""

import json

import numpy as np
import pytest

from formats import scores


def _summary():
    return scores.make("cider-d", {"zh": np.float32(0.5), "en": 0.25}, {"en": 3, "zh": 2},
                       step=7, config="bb.py", coco_dev_scores={"en": 0.75},
                       extra={"avg_35": None, "decoding": {"method": "greedy"}})


def test_round_trip_in_the_papers_language_order(tmp_path):
    summary = _summary()
    assert list(summary["scores"]) == ["en", "zh"]
    assert summary["average"] == pytest.approx(0.375)
    path = scores.write(tmp_path / scores.file_name(), summary)
    assert json.loads(path.read_text())["scores"] == {"en": 0.25, "zh": 0.5}
    assert scores.read(path) == summary
    assert scores.file_name("vifidel") == "scores_vifidel.json"


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("num_images"), "scores.json: num_images: expected a {lang: count} dict"),
    (lambda s: s["scores"].update(xx=0.1), "scores.json: unknown language in scores 'xx'"),
    (lambda s: s["scores"].pop("zh"), "without a count: none; without a score: zh"),
    (lambda s: s["scores"].update(en="0.3"), "scores.json: scores['en']: expected a finite"),
    (lambda s: s["coco_dev_scores"].update(en=None), "coco_dev_scores['en']: expected a"),
    (lambda s: s.update(step=-1), "scores.json: field 'step': expected a step >= 0"),
    (lambda s: s.pop("metric"), "scores.json: field 'metric'"),
])
def test_read_names_the_file_with_the_field(tmp_path, change, message):
    summary = json.loads(json.dumps(_summary()))
    change(summary)
    path = tmp_path / "scores.json"
    path.write_text(json.dumps(summary))
    with pytest.raises(scores.ScoresError) as info:
        scores.read(path)
    assert message in str(info.value)


def test_not_json_names_the_line(tmp_path):
    path = tmp_path / "scores.json"
    path.write_text('{\n  "metric": "cider-d",\n  oops\n}')
    with pytest.raises(scores.ScoresError, match=r"scores.json:3: not valid JSON"):
        scores.read(path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(scores.ScoresError, match="scores file not found"):
        scores.read(tmp_path / "none.json")


def test_make_refuses_extra_fields_of_the_format():
    with pytest.raises(scores.ScoresError, match="extra fields step are fields of the format"):
        scores.make("cider-d", {"en": 0.1}, {"en": 1}, extra={"step": 3})


def test_write_refuses_a_bad_summary_writing_nothing(tmp_path):
    bad = dict(_summary(), num_images={"en": -1, "zh": 2})
    with pytest.raises(scores.ScoresError, match=r"num_images\['en'\]: expected a count"):
        scores.write(tmp_path / "out.json", bad)
    assert not (tmp_path / "out.json").exists()
