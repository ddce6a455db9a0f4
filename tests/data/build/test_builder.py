"""The build's machinery (data/build/builder.py, image_shards.py, caption_tables.py, progress.py):
resuming, corrupt images, re-encoding, worker processes, caption tables from spills, progress."""

import io
import os

import numpy as np
import pytest
from PIL import Image

from data import build
from data.build import builder, caption_tables, image_shards, layout
from data.build import progress as progress_module
from data.build.progress import Progress
from tests.data.build import release_files

COCOIDS = (5, 6, 7, 8, 9, 10)
SPLITS = ("train", "restval", "train", "restval", "train", "val")


def _manual(tmp_path, size=(12, 10)):
    return release_files.coco35l(tmp_path / "manual", images=COCOIDS, splits=SPLITS, size=size)


def _build(manual, data_dir, **kwargs):
    return build.build("coco35l", manual_dir=str(manual), data_dir=str(data_dir),
                       **{"langs": ["en", "zh"], "workers": 0, **kwargs})


def _contents(data_dir):
    """Every record of a build, decoded: {split: [records]} of images and caption tables."""
    out = {}
    for kind in ("images", "captions"):
        folder = os.path.join(data_dir, "coco35l", kind, layout.VERSION)
        for split, lengths in layout.read_splits(folder).items():
            table = layout.Table(folder, "coco35l", split, lengths, lambda record: record)
            out[f"{kind}/{split}"] = table.read(range(len(table)))
    return out


def _shard_times(data_dir):
    folder = layout.images_dir(str(data_dir), "coco35l")
    return {n: os.stat(os.path.join(folder, n)).st_mtime_ns for n in os.listdir(folder)
            if n.startswith("coco35l-train.array_record")}


def test_a_stopped_build_resumes_from_its_finished_shards(tmp_path, monkeypatch):
    monkeypatch.setattr(image_shards, "SHARD_BYTES", 1)  # One image per shard.
    manual = _manual(tmp_path)
    broken = manual / "train2014" / "COCO_train2014_000000000009.jpg"
    good = broken.read_bytes()
    broken.write_bytes(good[:40])
    with pytest.raises(image_shards.CorruptImageError,
                       match=r"corrupt image .*COCO_train2014_000000000009.jpg: .*build with "
                             r"--corrupt_images skip"):
        _build(manual, tmp_path / "built")
    finished = _shard_times(tmp_path / "built")
    assert len(finished) == 4  # The other train shards are written and kept.
    assert not (tmp_path / "built" / "coco35l" / "images" / "2.0.0" / "dataset_info.json").exists()
    broken.write_bytes(good)
    _build(manual, tmp_path / "built")
    resumed = _shard_times(tmp_path / "built")
    assert len(resumed) == 5 and all(resumed[n] == t for n, t in finished.items())
    _build(manual, tmp_path / "clean")
    assert _contents(tmp_path / "built") == _contents(tmp_path / "clean")
    assert not (tmp_path / "built" / "coco35l" / ".build").exists()


def test_an_interrupted_shard_is_written_again(tmp_path, monkeypatch):
    monkeypatch.setattr(image_shards, "SHARD_BYTES", 1)
    manual = _manual(tmp_path)
    _build(manual, tmp_path / "clean")
    release = build.release("coco35l", str(manual))
    shards, _ = release.image_shards("train")
    state = tmp_path / "built" / "coco35l" / ".build"
    out = layout.images_dir(str(tmp_path / "built"), "coco35l")
    os.makedirs(out)
    os.makedirs(state)
    options = image_shards.ImageOptions()
    image_shards.write_image_shard("coco35l", shards[0], out, str(state), options)
    # A killed worker leaves its shard half written, under its temporary name.
    partial = layout.shard_path(out, "coco35l", "train", 1, len(shards)) + ".incomplete"
    with open(partial, "wb") as f:
        f.write(b"half a shard")
    _build(manual, tmp_path / "built")
    assert _contents(tmp_path / "built") == _contents(tmp_path / "clean")
    assert not any(n.endswith(".incomplete") for n in os.listdir(out))


def test_skipped_corrupt_images_leave_their_captions_out_with_a_count(tmp_path, caplog):
    manual = _manual(tmp_path)
    (manual / "val2014" / "COCO_val2014_000000000006.jpg").write_bytes(b"\xff\xd8 broken")
    counts = _build(manual, tmp_path / "built", corrupt_images="skip")
    assert counts["images/train"] == 4 and counts["captions/train_zh"] == 4
    assert "skipped 1 corrupt images, e.g. " in caplog.text
    keys = [k for _, k, _ in layout.Built(str(tmp_path / "built"), "coco35l").captions(
        "train", "zh").read(range(4))]
    assert keys == [5, 7, 8, 9]


def test_images_are_re_encoded_at_the_chosen_maximum_side(tmp_path):
    manual = _manual(tmp_path, size=(40, 30))
    _build(manual, tmp_path / "built", max_side=32)
    built = layout.Built(str(tmp_path / "built"), "coco35l")
    assert built.metadata() == {"max_side": 32, "jpeg_quality": 90, "corrupt_images": "stop"}
    _, data = built.images("dev")[0]
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (32, 24) and image.format == "JPEG"
        assert abs(int(np.asarray(image).mean()) - 100) <= 3  # Grey 100, as written.
    with pytest.raises(ValueError, match=r"were built with max_side=32, jpeg_quality=90; build "
                                         r"with those \(--max_side 32\)"):
        _build(manual, tmp_path / "built", langs=["es"])
    _build(manual, tmp_path / "built", langs=["es"], max_side=32)
    assert built.images("dev")[0][1] == data


def test_worker_processes_write_what_one_process_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(image_shards, "SHARD_BYTES", 1500)
    manual = _manual(tmp_path)
    _build(manual, tmp_path / "serial")
    _build(manual, tmp_path / "parallel", workers=2)
    assert _contents(tmp_path / "serial") == _contents(tmp_path / "parallel")


def test_the_caption_tables_get_as_many_workers_as_fit_the_memory_budget(tmp_path, monkeypatch):
    """Stage 2 runs in a pool as large as the tables that fit TABLE_MEMORY at once: the image
    stage's idle workers would hold memory of their own (16 of them took 2.26 GB)."""
    manual = _manual(tmp_path)
    _build(manual, tmp_path / "serial")
    sizes = []
    pool = builder._pool
    monkeypatch.setattr(builder, "_pool", lambda workers: sizes.append(workers) or pool(workers))
    monkeypatch.setattr(builder, "TABLE_MEMORY", 1)  # One table at a time.
    _build(manual, tmp_path / "parallel", workers=2)
    assert sizes == [2, 1]
    assert _contents(tmp_path / "serial") == _contents(tmp_path / "parallel")


def _caption_table(tmp_path):
    """(the writer's summary, the table) of lines given twice and of an image not stored."""
    spill = caption_tables.Spill(str(tmp_path), "train", ["de"])
    for key, n, text in ((30, 1, "b"), (10, 0, "x"), (30, 0, "a"), (20, 0, "no image"),
                         (10, 0, "y"), (10, 1, "z")):
        spill.add("de", key, n, text)
    spill.close()
    np.save(tmp_path / "keys.npy", np.array([30, 10], np.int64))
    result = caption_tables.write_caption_table(
        "coco35l", "train_de", caption_tables.Spill.paths(str(tmp_path), "train", "de"),
        str(tmp_path / "keys.npy"), str(tmp_path))
    return result, layout.Table(str(tmp_path), "coco35l", "train_de", [2], layout.caption_row)


def test_caption_tables_drop_captions_without_images(tmp_path):
    result, _ = _caption_table(tmp_path)
    assert {k: result[k] for k in ("name", "num_examples", "num_captions", "no_image")} == {
        "name": "train_de", "num_examples": 2, "num_captions": 4, "no_image": 1}


def test_caption_tables_keep_the_last_line_of_each_caption(tmp_path):
    _, table = _caption_table(tmp_path)
    assert table.read([0, 1]) == [(0, 30, ("a", "b")), (1, 10, ("y", "z"))]


def test_progress_line_shows_the_shares_with_an_eta():
    out = io.StringIO()
    progress = Progress("coco35l", 4_000_000, 1000, stream=out, every=0, after=0)
    progress.image_done, progress.images = 1_000_000, 250
    progress.text_done, progress.lines = 500, 2_500_000
    line = progress.line()
    assert line.startswith("coco35l: images 25% (250, 1.0 MB of 4.0 MB) | text 50% (2.5M lines) "
                           "| "), line
    assert "ETA" in line
    progress.show()
    assert out.getvalue().count("\n") == 1


def test_the_caption_tables_get_an_eta_of_their_own(monkeypatch):
    clock = type("Clock", (), {"now": 1000.0, "monotonic": lambda self: self.now})()
    monkeypatch.setattr(progress_module, "time", clock)
    progress = Progress("cc3m35l", 100, 100, stream=io.StringIO(), every=0, after=0)
    progress.image_done = progress.text_done = 100  # Both done at 100 s: no ETA from them.
    clock.now = 1100.0
    progress.set_stage("caption tables 0/4", 0.0)
    assert progress.line() == "cc3m35l: images 100% (0, 100 B of 100 B) | text 100% (0.0M " \
                              "lines) | caption tables 0/4 | 1m40s"
    clock.now = 1160.0  # A quarter of the tables' work in the stage's first 60 s: 180 s to go.
    progress.set_stage("caption tables 1/4", 0.25)
    assert progress.line().endswith("| caption tables 1/4 | 2m40s, ETA 3m00s")
