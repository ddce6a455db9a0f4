"""Tests of tools/vifidel/labels.py: Open Images image-level and box files, JSONL, errors."""

import collections
import json

import pytest

from errors import InputError
from tools.vifidel import labels

DESCRIPTIONS = "LabelName,DisplayName\n/m/01,Dog\n/m/02,Traffic light\n/m/03,\"Cat, domestic\"\n"
IMAGE_LEVEL = ("ImageID,Source,LabelName,Confidence\n"
               "aaaa,verification,/m/01,1\n"
               "aaaa,crowdsource-verification,/m/01,1\n"
               "aaaa,verification,/m/02,0\n"
               "bbbb,verification,/m/03,1\n"
               "bbbb,machine,/m/02,0.7\n"
               "zzzz,verification,/m/99,1\n")
BOXES = ("ImageID,Source,LabelName,Confidence,XMin,XMax,YMin,YMax,IsOccluded\n"
         "aaaa,xclick,/m/01,1,0.1,0.2,0.1,0.2,0\n"
         "aaaa,xclick,/m/01,1,0.5,0.6,0.1,0.2,0\n"
         "aaaa,xclick,/m/02,1,0.3,0.4,0.1,0.2,0\n")


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, content in (("descriptions.csv", DESCRIPTIONS),
                          ("val-annotations-human-imagelabels.csv", IMAGE_LEVEL),
                          ("val-annotations-bbox.csv", BOXES)):
        (tmp_path / name).write_text(content)
        out[name.split(".")[0].split("-")[-1]] = str(tmp_path / name)
    return out


def test_image_level_keeps_verified_positives_once_boxes_count(files, tmp_path):
    got = labels.read_labels([files["imagelabels"]], ["aaaa", "bbbb"],
                             class_descriptions=files["descriptions"])
    # Two sources verifying Dog count once; the verified negative and the machine label are
    # left out; a row of another image (with an unknown MID) is never parsed.
    assert got == {"aaaa": {"Dog": 1}, "bbbb": {"Cat, domestic": 1}}
    machine = labels.read_labels([files["imagelabels"]], ["bbbb"], min_confidence=0.5,
                                 class_descriptions=files["descriptions"])
    assert machine == {"bbbb": {"Cat, domestic": 1, "Traffic light": 1}}
    # Boxes count, and files merge by the largest weight.
    got = labels.read_labels([str(tmp_path / "*-annotations-*.csv")], ["aaaa"],
                             class_descriptions=files["descriptions"])
    assert got == {"aaaa": collections.Counter({"Dog": 2, "Traffic light": 1})}


def test_header_less_class_descriptions(tmp_path):
    (tmp_path / "class-descriptions-boxable.csv").write_text("/m/01,Dog\n/m/02,Cat\n")
    assert labels.read_class_descriptions(str(tmp_path / "class-descriptions-boxable.csv")) == {
        "/m/01": "Dog", "/m/02": "Cat"}


def test_labels_jsonl(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"image/key": "k1", "labels": ["dog", "dog", "Traffic light"]},
        {"image/key": "k2", "labels": ["cat"]}]))
    assert labels.read_labels([str(path)], ["k1"]) == {"k1": {"dog": 2, "Traffic light": 1}}


@pytest.mark.parametrize("content, message", [
    ("ImageID,Source,Label,Confidence\n", r"missing column\(s\) LabelName; found"),
    ("ImageID,Source,LabelName,Confidence\naaaa,v,/m/77,1\n",
     r"labels.csv:2: label '/m/77' is not in the class descriptions"),
    ("ImageID,Source,LabelName,Confidence\naaaa,v,/m/01,yes\n",
     r"labels.csv:2: column Confidence: not a number: 'yes'"),
    ("ImageID,Source,LabelName,Confidence\naaaa,v,/m/01,2\n", "outside"),
    ("ImageID,Source,LabelName,Confidence\nqqqq,v,/m/01,1\n",
     r"no label for any of the 1 images asked for \(e.g. aaaa\); are these the labels of "
     r"other images\?"),
])
def test_bad_open_images_files(files, tmp_path, content, message):
    path = tmp_path / "labels.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        labels.read_labels([str(path)], ["aaaa"], class_descriptions=files["descriptions"])


def test_bad_jsonl_is_named_by_its_line(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text('{"image/key": "k", "labels": "dog"}\n')
    with pytest.raises(InputError, match=r"l.jsonl:1: image 'k': \"labels\" must be a list"):
        labels.read_labels([str(path)], ["k"])


def test_a_missing_label_file_is_named(tmp_path):
    with pytest.raises(InputError, match="label file not found"):
        labels.read_labels([str(tmp_path / "nope*.csv")], ["k"])


def test_image_labels_need_the_class_descriptions(files):
    with pytest.raises(InputError, match="needs the class descriptions"):
        labels.read_labels([files["imagelabels"]], ["aaaa"])


def test_a_bad_class_description_is_named_by_its_line(tmp_path):
    (tmp_path / "d.csv").write_text("/m/01\n")
    with pytest.raises(InputError, match=r"d.csv:1: expected 'MID,display name'"):
        labels.read_class_descriptions(str(tmp_path / "d.csv"))
