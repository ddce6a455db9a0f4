"""One owner per exchanged file: no module outside formats/ and tools/formats/ names one of
those files in code (a whitespace-free string), nor builds a predictions or per-image line
other than as a dict with the format's keys. Modules are read with `ast`."""

import ast
import re

import pytest

import errors
from formats import eval_metrics, per_image, predictions, scores
from tests import test_structure
from tools.formats import side_by_side, thumb_ratings, triplet_judgements

# The file names of each exchanged format (on a string's text, f-string values as "{}").
FILE_NAMES = {
    predictions: r"predictions_",
    per_image: r"(^|/)per_image\S*\.jsonl$",
    scores: r"(^|/)scores[^/.]*\.json$",
    eval_metrics: r"(^|/)metrics\.json$",
    thumb_ratings: r"(^|/)thumb[^/.]*\.jsonl$",
    side_by_side: r"(^|/)side_by_side[^/.]*\.csv$",
    triplet_judgements: r"(^|/)triplets[^/.]*\.jsonl$",
}


# The keys of one line of the line-based formats (a dict built with them is a line written).
LINE_KEYS = {
    predictions: {"image/key", "lang", "caption"},
    per_image: {"image/key", "lang", "score"},
}


def _strings(tree):
    """(line, text) of every string in code: constants and f-string templates, no docstrings."""
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    parts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts |= {id(v) for v in node.values}
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}"
                                       for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings and id(node) not in parts:
            yield node.lineno, node.value


def owners_violations(source, name="module"):
    """["name:line: 'text' names a <format> file"] for the file names in `source`'s code."""
    found = []
    for line, text in _strings(ast.parse(source)):
        if re.search(r"\s", text):
            continue  # Prose.
        for module, pattern in FILE_NAMES.items():
            if re.search(pattern, text):
                found.append(f"{name}:{line}: {text!r} names a {module.__name__} file")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            found += [f"{name}:{node.lineno}: a dict of {sorted(line_keys)} is a "
                      f"{module.__name__} line" for module, line_keys in LINE_KEYS.items()
                      if line_keys <= keys]
    return found


OWNERS = ("formats", "tools.formats")

# The exported model's runner imports nothing of the project (it runs without it), so it
# writes its predictions lines itself; tests/tools/captioning/test_export.py reads them with
# formats/predictions.py.
STAND_ALONE = ("tools.captioning.run_exported",)


def test_no_module_outside_formats_names_an_exchanged_file():
    bad = []
    for name, path in test_structure.project_modules().items():
        if not any(test_structure.within(name, owners) for owners in OWNERS) \
                and name not in STAND_ALONE:
            bad += owners_violations(path.read_text(encoding="utf-8"), name)
    assert not bad, "read or write these files through formats/:\n" + "\n".join(bad)


@pytest.mark.parametrize("module", list(FILE_NAMES), ids=lambda m: m.__name__)
def test_each_format_has_a_reader_with_a_writer(module):
    assert callable(module.read) and callable(module.write)


@pytest.mark.parametrize("module", list(FILE_NAMES), ids=lambda m: m.__name__)
def test_each_format_has_one_error_an_input_error(module):
    errors_of = [v for v in vars(module).values() if isinstance(v, type)
                 and issubclass(v, Exception) and v.__module__ == module.__name__]
    assert len(errors_of) == 1, errors_of
    assert issubclass(errors_of[0], errors.InputError)


def test_the_check_sees_a_second_reader():
    source = '''
import json, os
"""Module docstring naming per_image.jsonl is prose."""
def read(folder, lang):
    with open(os.path.join(folder, "per_image.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    text = open(f"{folder}/predictions_{lang}.jsonl").read()
    for path in glob.glob(os.path.join(folder, "thumb_*.jsonl")):
        pass
    raise ValueError(f"{folder}: no scores.json there")  # Prose: not a violation.
    return (json.load(open(folder + "/scores_vifidel.json")), "side_by_side.csv", "metrics.json",
            "triplets.jsonl")
def write(path, keys, captions):
    with open(path, "w") as f:
        f.writelines(json.dumps({"image/key": k, "lang": "en", "caption": c}) + "\\n"
                     for k, c in zip(keys, captions))
'''
    found = owners_violations(source)
    # Each format once: line 10 (an error message) is prose.
    assert sorted(f.split(" names a ")[1] for f in found if " names a " in f) == sorted(
        f"{m.__name__} file" for m in FILE_NAMES), found
    assert not [f for f in found if f.startswith("module:10:")]
    assert [f for f in found if " is a " in f] == [
        "module:15: a dict of ['caption', 'image/key', 'lang'] is a formats.predictions line"]
