"""Inputs of the human-evaluation tests: the tiny demo's XM3600 split with Arabic captions
added, and results folders written by the evaluation's own writers (captions drawn from the
references, made-up per-image scores; no model is trained)."""

import json
import os
import shutil
import subprocess
import sys
import urllib.parse

import numpy as np

from evaluation import report
from formats import per_image as per_image_format
from formats import predictions
from tests import tiny
from tools.humaneval import create

ARABIC = ("صورة فيها شكل ملون", "شكل صغير في وسط الصورة", "رسم بسيط على خلفية بيضاء")

LANGS = ("en", "zh", "ar")  # The languages of the results folders of the tests.


def new_session(release, results_pair, folder, warn=None, **overrides):
    """A new session in `folder` (sxs over LANGS, 6 images, Spec fields as overridden); `warn`
    gets create's warnings."""
    fields = dict(type="sxs", release=release, langs=LANGS,
                  systems=(("base", results_pair[0]), ("test", results_pair[1])),
                  subset_size=6, subset_seed=0, replication=3, gold_share=0.34, seed=0,
                  name="base_vs_test")
    fields.update(overrides)
    return create.create(create.Spec(**fields), folder, warn=warn)



def write_release(demo_xm3600, out):
    """Copies the demo's XM3600 split to `out`, adding two Arabic captions per image."""
    os.makedirs(out, exist_ok=True)
    shutil.copytree(os.path.join(demo_xm3600, "images"), os.path.join(out, "images"))
    with open(os.path.join(demo_xm3600, "captions.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    with open(os.path.join(out, "captions.jsonl"), "w", encoding="utf-8") as f:
        for n, record in enumerate(records):
            refs = [f"{ARABIC[n % 3]} {n}", f"{ARABIC[(n + 1) % 3]} رقم {n}"]
            record["ar"] = {"caption": refs, "caption/tokenized": refs}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return out


def release_records(release):
    """[(key, {lang: [references]})] of a release folder, in file order."""
    with open(os.path.join(release, "captions.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [(r["image/key"], {k: v["caption"] for k, v in r.items() if isinstance(v, dict)})
            for r in rows]


def write_results(out, release, langs, good, seed, *, keys=None, lang_field=None, coco_dev=True):
    """Writes a results folder `out` for `langs` of the images `keys` (default: all); returns
    {lang: {key: caption}}. A caption is its image's first reference with probability `good`;
    `lang_field` writes a wrong "lang" (a malformed folder); `coco_dev`: COCO-dev scores too."""
    rng = np.random.default_rng(seed)
    records = release_records(release)
    keys = keys or [k for k, _ in records]
    refs = dict(records)
    captions, per_image = {}, {}
    for lang in langs:
        captions[lang], per_image[lang] = {}, {}
        for n, key in enumerate(keys):
            own = rng.random() < good
            source = key if own else keys[(n + 1) % len(keys)]
            captions[lang][key] = refs[source][lang][0]
            per_image[lang][key] = (1.0 if own else 0.1) + 0.01 * n
        os.makedirs(out, exist_ok=True)
        predictions.write(os.path.join(out, predictions.file_name(lang)),
                          {lang_field or lang: captions[lang]})
    scores = {lang: float(np.mean(list(v.values()))) for lang, v in per_image.items()}
    per_image_format.write(os.path.join(out, per_image_format.file_name()), per_image)
    report.write_report(out, scores, {lang: len(keys) for lang in langs},
                        coco_dev_scores={lang: s / 2 for lang, s in scores.items()}
                        if coco_dev else None, name=os.path.basename(out), step=1)
    return captions


def join(client, session, lang="en", **params):
    """A crowd participant arriving through `lang`'s enrolment link with `params` (the test
    client's response)."""
    return client.get(f"/join/{session.crowd['enrol_token']}/{lang}?"
                      + urllib.parse.urlencode(params))


def token(response):
    """The token of the link an enrolment sent the participant to."""
    assert response.status_code == 303, response.get_data(as_text=True)
    return response.location.rsplit("/r/", 1)[1]


def ratings(session):
    """Every stored rating of `session` (store.Store.ratings)."""
    from tools.humaneval import store
    with store.Store(session.db_path) as db:
        return db.ratings()


def pass_introduction(session, raters=None):
    """Marks the introduction (consent, guidelines, practice) as passed by `raters` (default:
    all), straight in the store, for tests of what comes after it."""
    from tools.humaneval import store
    store.init(session.db_path, session.digest)
    with store.Store(session.db_path) as db:
        for rater in session.raters:
            if raters is not None and rater.name not in raters:
                continue
            db.pass_step(rater.name, "consent")
            db.pass_step(rater.name, "guidelines")
            for item in session.practice[rater.lang]:
                db.add_practice(rater.name, item["id"], {}, True)


def client(session):
    """Flask's test client of the session's app."""
    from tools.humaneval import app
    return app.create_app(session.folder).test_client()


def start_server(session, port=0):
    """Starts `python -m tools.humaneval serve` as its own process; returns (process, port)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.humaneval", "serve", "--session", session.folder,
         "--port", str(port)], cwd=tiny.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    line = proc.stdout.readline()
    assert line.startswith("serving http://127.0.0.1:"), line + proc.stdout.read()
    return proc, int(line.rsplit(":", 1)[1])
