"""Tests of session creation from results folders (tools/humaneval/create.py)."""

import collections
import json
import os
import shutil

import pytest

from errors import InputError
from formats import per_image, predictions
from tests.tools.humaneval import helpers
from tests.tools.humaneval.conftest import LANGS
from tools.humaneval import app as app_lib
from tools.humaneval import create, store, subsets
from tools.humaneval import session as session_lib


def _release_keys(release):
    return [k for k, _ in helpers.release_records(release)]


def test_sxs_session_layout(make_session, results_pair, release):
    session = make_session()
    keys = subsets.select(_release_keys(release), 6, 0)
    assert session.data["subset"]["keys"] == keys
    base = {lang: _captions(results_pair[0], lang) for lang in LANGS}
    test = {lang: _captions(results_pair[1], lang) for lang in LANGS}
    for lang in LANGS:
        items = [i for i in session.items.values() if i.lang == lang]
        tests = [i for i in items if not i.is_gold]
        assert sorted(i.image for i in tests) == sorted(keys)
        assert len(items) - len(tests) == round(0.34 * 6)
        for item in tests:
            # The recorded order says which model wrote which side.
            m1, m2 = item.side_of("m1"), item.side_of("m2")
            assert {m1, m2} == {0, 1}
            assert item.texts[m1] == base[lang][item.image]
            assert item.texts[m2] == test[lang][item.image]
        for item in items:
            if item.kind == "gold-identical":
                assert item.texts[0] == item.texts[1]
            if item.kind == "gold-other-image":
                images = [s["image"] for s in item.sources]
                assert item.image in images and len(set(images)) == 2
    # Each item has exactly `replication` distinct raters of its language.
    raters_of = collections.defaultdict(list)
    for name, ids in session.assignments.items():
        for item_id in ids:
            raters_of[item_id].append(name)
            assert session.by_name[name].lang == session.items[item_id].lang
    assert all(len(set(v)) == len(v) == 3 for v in raters_of.values())
    assert set(raters_of) == set(session.items)
    # The system records carry the CIDEr-D the analysis needs.
    m1 = session.systems["m1"]
    assert m1["name"] == "base" and set(m1["cider_xm3600"]) == set(LANGS)
    assert set(m1["cider_per_image"]["en"]) == set(keys)


def _captions(folder, lang):
    """{key: caption} of a results folder's predictions in `lang`, in file order."""
    return predictions.read_language(os.path.join(folder, predictions.file_name(lang)), lang)


def test_randomization_is_seeded_but_tokens_are_not(make_session):
    a, b, c = make_session(seed=3), make_session(seed=3), make_session(seed=4)
    assert a.data["items"] == b.data["items"]
    assert a.data["assignments"] == b.data["assignments"]
    assert [r.token for r in a.raters] != [r.token for r in b.raters]
    assert a.data["items"] != c.data["items"]
    sides = [i.side_of("m2") for i in a.items.values() if not i.is_gold]
    assert set(sides) == {0, 1}  # both orders occur


def test_more_raters_than_replication_share_the_load(make_session):
    session = make_session(langs=("en",), replication=2, raters=("en=ann,bob,cyd,dan",))
    loads = [len(ids) for ids in session.assignments.values()]
    assert sorted(session.assignments) == ["ann", "bob", "cyd", "dan"]
    assert max(loads) - min(loads) <= 1 and sum(loads) == 2 * len(session.items)


def test_quality_session_of_the_references(make_session):
    session = make_session(type="quality", systems=(), references=True, langs=("ar",),
                           gold_share=0.1)
    tests = [i for i in session.items.values() if not i.is_gold]
    assert len(tests) == 6 * 2  # two references per image
    assert all(len(i.texts) == 1 and i.sources[0]["system"] == "references" for i in tests)


@pytest.mark.parametrize("change, message", [
    (dict(langs=("en", "xx")), "unknown language 'xx'"),
    (dict(langs=("en", "es")), "no predictions in 'es'"),
    (dict(replication=4, raters=("3",)), "fewer than the replication"),
    (dict(raters=("fr=a,b,c",)), "one of the session's languages"),
    (dict(subset_size=None), "XM600 needs 600 images"),
    (dict(subset_size=9), "outside 1..8"),
    (dict(gold_share=1.5), "--gold-share"),
])
def test_bad_specs(make_session, change, message):
    with pytest.raises(InputError, match=message):
        make_session(**change)


def test_the_same_folder_twice(make_session, results_pair):
    with pytest.raises(InputError, match="given twice"):
        make_session(systems=(("a", results_pair[0]), ("b", results_pair[0] + "/")))


def test_results_of_other_images(make_session, release, results_pair, tmp_path):
    keys = _release_keys(release)
    folder = str(tmp_path / "foreign")
    helpers.write_results(folder, release, LANGS, good=1.0, seed=0, keys=keys[:7])
    # A prediction for an image the release does not have.
    with open(os.path.join(folder, "predictions_zh.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"image/key": "0000notanimage00", "lang": "zh", "caption": "x"}) + "\n")
    systems = (("a", folder), ("b", results_pair[1]))
    with pytest.raises(InputError, match="predictions_en.jsonl: no caption for 1 of the "
                                         "session's 8 images"):
        make_session(systems=systems, subset_size=8)
    with pytest.raises(InputError, match="predictions_zh.jsonl: 1 of its 8 images are not in "
                                         "the XM3600 release"):
        make_session(systems=systems, subset_size=2, subset_seed=_seed_within(keys[:7], keys))


def _seed_within(keys, every):
    """A seed whose 2-image subset of `every` lies within `keys`."""
    return next(s for s in range(1000) if all(
        k in keys for k in sorted(every, key=lambda k: subsets.rank(s, k))[:2]))


def test_results_with_a_wrong_language_field(make_session, release, results_pair, tmp_path):
    folder = str(tmp_path / "mislabelled")
    helpers.write_results(folder, release, LANGS, good=1.0, seed=0, lang_field="de")
    with pytest.raises(InputError, match=r"predictions_en.jsonl:1: field 'lang' is 'de'"):
        make_session(systems=(("a", folder), ("b", results_pair[1])))


def test_scores_of_other_languages(make_session, results_pair, tmp_path):
    folder = str(tmp_path / "fewer_scores")
    shutil.copytree(results_pair[0], folder)
    path = os.path.join(folder, "scores.json")
    with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    del summary["scores"]["ar"]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    # A score missing beside its count: a malformed file (formats/scores.py).
    with pytest.raises(InputError, match="scores.json: num_images and scores cover different "
                                         "languages: without a count: none; without a score: ar"):
        make_session(systems=(("a", folder), ("b", results_pair[1])))
    del summary["num_images"]["ar"]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    # A well-formed file of other languages than the session's.
    with pytest.raises(InputError, match="scores.json: no 'scores' for 'ar'"):
        make_session(systems=(("a", folder), ("b", results_pair[1])))


def test_an_existing_session_is_never_overwritten(make_session, tmp_path):
    session = make_session()
    before = open(os.path.join(session.folder, "session.json"), encoding="utf-8").read()
    spec = create.Spec(type="sxs", release=session.data["release"], langs=("en",),
                       systems=tuple((s["name"], s["results"])
                                     for s in session.data["systems"]), subset_size=6)
    with pytest.raises(InputError, match="exists"):
        create.create(spec, session.folder)
    assert open(os.path.join(session.folder, "session.json"), encoding="utf-8").read() == before
    assert session_lib.load(session.folder).digest == session.digest


@pytest.mark.parametrize("extra, message", [
    (None, r"per_image.jsonl:(\d+): image '.*' in language 'en' appears twice"),
    ({"image/key": "x", "lang": "xx", "score": 1.0}, r"per_image.jsonl:\d+: unknown language"),
])
def test_per_image_scores_are_read_strictly(make_session, results_pair, tmp_path, extra,
                                            message):
    # The one reader (formats/per_image.py): a repeated image or an unknown language is an
    # error naming the line, never a score overwritten or skipped.
    folder = str(tmp_path / "strict")
    shutil.copytree(results_pair[0], folder)
    path = os.path.join(folder, "per_image.jsonl")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    line = next(x for x in lines if json.loads(x)["lang"] == "en") if extra is None \
        else json.dumps(extra)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    with pytest.raises(InputError, match=message) as info:
        make_session(systems=(("a", folder), ("b", results_pair[1])))
    assert f"per_image.jsonl:{len(lines) + 1}:" in str(info.value)


def _copy_with_captions(source, folder, lang, change):
    """A copy of a results folder whose `lang` captions are changed by fn(captions)."""
    shutil.copytree(source, folder)
    path = os.path.join(folder, predictions.file_name(lang))
    captions = predictions.read_language(path, lang)
    change(captions)
    predictions.write(path, {lang: captions})
    return str(folder)


def test_identical_results_folders_are_refused(make_session, results_pair, tmp_path):
    twin = str(tmp_path / "twin")
    shutil.copytree(results_pair[1], twin)
    with pytest.raises(InputError, match="base and twin have identical captions in 'en' on all "
                                         "6 images of the session: the same model twice"):
        make_session(systems=(("base", results_pair[1]), ("twin", twin)))
    # Identical on some images: what that means depends on the scale.
    keys = subsets.select(list(_captions(results_pair[0], "en")), 6, 0)
    near = _copy_with_captions(results_pair[1], tmp_path / "near", "en",
                               lambda c: c.update({keys[0]: "another caption"}))
    for kind, systems, meaning in (
            ("sxs", (("base", results_pair[1]), ("near", near)), "can only rate those Similar"),
            ("thumb", (("base", results_pair[1]), ("near", near)),
             "the same text is rated once for each of them")):
        warnings = []
        make_session(type=kind, systems=systems, langs=("en",), warn=warnings.append)
        (warning,) = [w for w in warnings if "identical captions in 'en' for 5" in w]
        assert warning.endswith(meaning)


def test_blank_captions_are_marked_on_the_page_with_a_warning(make_session, results_pair, tmp_path):
    keys = subsets.select(list(_captions(results_pair[0], "en")), 6, 0)
    folder = _copy_with_captions(results_pair[0], tmp_path / "blank", "en",
                                 lambda c: c.update({keys[0]: "", keys[1]: "  \t"}))
    warnings = []
    session = make_session(systems=(("a", folder), ("b", results_pair[1])), warn=warnings.append)
    assert any("predictions_en.jsonl: 2 of the session's 6 captions are empty or blank"
               in w for w in warnings)
    helpers.pass_introduction(session)
    client = app_lib.create_app(session.folder).test_client()
    rater = session.raters[0]
    n = next(n for n, i in enumerate(session.assignments[rater.name], start=1)
             if session.items[i].image == keys[0] and session.items[i].kind == "test")
    page = client.get(f"/r/{rater.token}/item/{n}").get_data(as_text=True)
    assert 'class="caption empty"' in page and "(this caption is empty)" in page


def test_per_image_scores_must_cover_the_session(make_session, results_pair, tmp_path):
    folder = str(tmp_path / "partial")
    shutil.copytree(results_pair[0], folder)
    path = os.path.join(folder, per_image.file_name())
    scores = per_image.read(path)
    session_keys = subsets.select(list(_captions(results_pair[0], "en")), 6, 0)
    del scores["zh"][session_keys[2]]
    per_image.write(path, scores)
    with pytest.raises(InputError, match=r"per_image.jsonl: no score for 1 of the session's 6 "
                                         r"images in 'zh'"):
        make_session(systems=(("a", folder), ("b", results_pair[1])))
    os.remove(path)  # no per-image file at all: warned, the session is made
    warnings = []
    session = make_session(systems=(("a", folder), ("b", results_pair[1])), warn=warnings.append)
    assert any("has no per-image scores file" in w for w in warnings)
    assert session.systems["m1"]["cider_subset"] == {}


@pytest.mark.parametrize("change, message", [
    (dict(quota=8, raters=("3",)), "give --quota or --raters, not both"),
    (dict(quota=0), "--quota 0: a rater needs at least 8 items for straight-lining"),
    (dict(quota=7), "give --quota 8 or more"),
    (dict(crowd=True), "a crowd study needs --consent"),
    (dict(completion_code="X"), "are for --crowd sessions"),
    (dict(crowd=True, consent="CONSENT", completion_code="a b"), "--completion-code 'a b'"),
    (dict(crowd=True, consent="CONSENT", completion_url="ftp://x"), "expected an http"),
    (dict(consent="nowhere.txt"), "--consent: nowhere.txt not found"),
    (dict(translations=(("ar", "T"),)), "--translation ar=T: 'ar' is not a session language"),
])
def test_bad_study_specs(make_session, consent, change, message):
    change = {k: (consent if v == "CONSENT" else v) for k, v in change.items()}
    with pytest.raises(InputError, match=message):
        make_session(langs=("en", "zh"), **change)


def test_the_session_file_is_private(make_session):
    session = make_session()
    assert os.stat(os.path.join(session.folder, "session.json")).st_mode & 0o777 == 0o600
    store.init(session.db_path, session.digest)
    assert os.stat(session.db_path).st_mode & 0o777 == 0o600
    with store.Store(session.db_path) as db:  # the WAL files take the database's mode
        db.pass_step("en-1", "guidelines")
        assert os.stat(session.db_path + "-wal").st_mode & 0o777 == 0o600


def test_a_predictions_file_is_named_with_the_command_that_makes_its_folder(
        make_session, results_pair, release, tmp_path):
    import shlex

    from tests.formats.test_predictions import every_kind
    from tools import table8

    captions = _captions(results_pair[1], "en")
    for kind, path in every_kind(tmp_path, captions).items():
        with pytest.raises(InputError) as info:
            make_session(langs=("en",), systems=(("base", results_pair[0]), ("test", path)))
        message, command = str(info.value).split(" make one with ")
        assert message == f"{path} is a predictions file, not a results folder:", kind
        assert command.endswith(" and give that folder")
        argv = shlex.split(command.removesuffix(" and give that folder"))
        assert argv[:3] == ["python", "-m", "tools.table8"]
        assert table8.main(argv[3:]) == 0
        session = make_session(langs=("en",), systems=(("base", results_pair[0]),
                                                       ("test", argv[3])))
        assert {i.texts[i.side_of("m2")] for i in session.items.values() if not i.is_gold} <= \
            set(captions.values()), kind


def test_slots_too_small_to_judge_straight_lining_are_warned_with_a_quota_that_fits(
        make_session):
    # 8 images + 2 attention checks at replication 3: 30 assignments, 4 slots of 7-8 at quota 8.
    warnings = []
    make_session(langs=("en",), subset_size=8, quota=8, gold_share=0.25, warn=warnings.append)
    warned = [w for w in warnings if "straight-lining" in w]
    assert warned == ["'en': its rater slots get 7-8 items, fewer than the 8 straight-lining is "
                      "judged on; give --quota 10, the smallest whose slots all get 8 or more"]
    session = make_session(langs=("en",), subset_size=8, quota=10, gold_share=0.25)
    assert min(map(len, session.assignments.values())) >= 8  # the suggestion fits
