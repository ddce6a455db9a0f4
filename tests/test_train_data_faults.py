"""Bad training data in train.py: an image record that no longer decodes stops the run before
the step-0 evaluation naming it; a data error mid-run saves the last completed step first."""

import shutil

import pytest

import train
from data import images as image_lib
from data import pipeline
from tests import tiny
from tests.tiny import tiny_config
from tests.training.saved_state import read_metrics
from training import checkpointing


def test_an_image_record_that_does_not_decode_stops_the_run_before_any_evaluation(tiny_demo,
                                                                                   tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_demo, data)
    tiny.spoil_built_images(data / "tfds")
    workdir = tmp_path / "run"
    with pytest.raises(train.TrainingError,  # The config evaluates at step 0.
                       match=r"config.data: cannot decode image key \d+ \(coco35l train image "
                             r"\d+\): .*; the built dataset changed since it was built: "
                             r"delete it and build it again$"):
        train.train_and_evaluate(tiny_config(str(data)), str(workdir))
    assert not (workdir / "metrics.jsonl").exists()  # No evaluation ran first.


@pytest.mark.parametrize("error,message", [
    (image_lib.ImageError("cannot decode image 42 (x.jpg): broken data stream"),
     r"step 4: cannot decode image 42 \(x.jpg\): broken data stream; the built dataset "
     r"changed since it was built"),
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
        "data.num_workers": 0,  # Batches made in this process.
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
