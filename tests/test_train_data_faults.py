"""Bad training data in train.py: found before any evaluation, and nothing trained is lost.

With data.reader=files the images are read as they are (no build checked
them): a corrupt one must stop the run before the step-0 evaluation, naming
the file. A data error that still happens mid-run (a file changed or deleted
while training) saves the last completed step before the run stops.
"""

import shutil

import pytest

import train
from data import images as image_lib
from data import pipeline
from tests.tiny import tiny_config
from training import checkpointing
from training.metrics import read_metrics


@pytest.fixture
def data(tiny_demo, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(tiny_demo, copy)
    return copy


def test_corrupt_image_with_the_files_reader_stops_the_run_before_any_evaluation(data,
                                                                                 tmp_path):
    jpeg = sorted((data / "coco35l" / "train2014").iterdir())[0]
    jpeg.write_bytes(b"\xff\xd8 not a jpeg")
    config = tiny_config(str(data), **{"data.reader": "files"})  # Evaluates at step 0.
    workdir = tmp_path / "run"
    with pytest.raises(train.TrainingError,
                       match=rf"config.data: cannot decode image .*{jpeg.name}.*; replace or "
                             r"delete that file \(the files reader leaves out images whose "
                             r"file is missing\)"):
        train.train_and_evaluate(config, str(workdir))
    assert not (workdir / "metrics.jsonl").exists()  # No evaluation ran first.
    # As the message says, without the file the run goes on.
    jpeg.unlink()
    state = train.train_and_evaluate(
        tiny_config(str(data), **{"data.reader": "files", "total_steps": 2,
                                  "evals.xm3600.every": 0}), str(workdir))
    assert int(state["step"]) == 2


def test_truncated_image_is_found_too(data, tmp_path):
    jpeg = sorted((data / "coco35l" / "train2014").iterdir())[-1]
    jpeg.write_bytes(jpeg.read_bytes()[:200])
    with pytest.raises(train.TrainingError, match=rf"cannot decode image .*{jpeg.name}"):
        train.train_and_evaluate(tiny_config(str(data), **{"data.reader": "files"}),
                                 str(tmp_path / "run"))
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.mark.parametrize("error,message", [
    (image_lib.ImageError("cannot decode image 42 (x.jpg): broken data stream"),
     r"step 4: cannot decode image 42 \(x.jpg\): broken data stream; replace or delete"),
    (FileNotFoundError("image file not found: 42 (x.jpg)"),
     r"step 4: image file not found: 42 \(x.jpg\)"),
])
def test_data_error_mid_run_saves_the_last_completed_step_first(tiny_demo, tmp_path,
                                                                monkeypatch, error, message):
    make = pipeline.Batch.__call__

    def failing_make(self, index):
        if index == 3:  # The batch of step 4 (step s trains on batch s - 1).
            raise error
        return make(self, index)

    monkeypatch.setattr(pipeline.Batch, "__call__", failing_make)
    config = tiny_config(str(tiny_demo), **{
        "data.reader": "files", "data.num_workers": 0,  # Batches made in this process.
        "total_steps": 6, "checkpoint.every": 100, "evals.xm3600.every": 0})
    workdir = tmp_path / "run"
    with pytest.raises(train.TrainingError,
                       match=message + r".*; saved step 3 in .*checkpoints first$"):
        train.train_and_evaluate(config, str(workdir))
    assert checkpointing.steps(str(workdir)) == [3]
    assert [r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r] == [1, 2, 3]
    # The resumed run (the file fixed) goes on from step 3.
    monkeypatch.setattr(pipeline.Batch, "__call__", make)
    state = train.train_and_evaluate(config, str(workdir))
    assert int(state["step"]) == 6
    assert [r["step"] for r in read_metrics(str(workdir))
            if "train/loss" in r] == [1, 2, 3, 4, 5, 6]
