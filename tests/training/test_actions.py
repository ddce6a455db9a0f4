"""Tests of the training loop's actions (training/actions.py)."""

import ml_collections
import numpy as np
import pytest

from training import actions


def _config():
    return ml_collections.ConfigDict({"log_every": 1, "total_steps": 100, "batch_size": 8,
                                      "checkpoint": {"every": 10}})


def _nan_step():
    return {"train/loss": np.float32(np.nan), "train/grad_norm": np.float32(1.0),
            "train/tokens": np.int32(8)}


class _Saver:
    folder = "W/checkpoints"

    def save(self, step, state):
        pass


def _error_of_log(step, start_step=20):
    """The error of a NaN at `step`, the checkpoints due since `start_step` saved."""
    checkpoint = actions.Checkpoint(_Saver(), _config(), start_step)
    for saved in range(start_step + 1, step):
        if checkpoint.due(saved):
            checkpoint(saved, None, {"train/loss": 1.0, "train/grad_norm": 1.0})
    log = actions.Log(None, _config(), start_step, step_flops=1.0, checkpoint=checkpoint)
    log(step, _nan_step())
    with pytest.raises(actions.TrainingError) as error:
        log.flush()
    return str(error.value)


def test_a_non_finite_step_before_the_first_save_after_a_resume_names_its_checkpoint():
    assert _error_of_log(27) == (
        "step 27: non-finite train/loss=nan; the last good checkpoint is kept in the workdir; "
        "the run resumed from W/checkpoints/20 and saved no checkpoint since: if its data is "
        "damaged, move it away to resume from the one before")


def test_a_non_finite_step_after_a_save_since_the_resume_names_no_checkpoint():
    assert _error_of_log(31) == ("step 31: non-finite train/loss=nan; the last good "
                                 "checkpoint is kept in the workdir")


def test_a_non_finite_step_of_a_fresh_run_names_no_checkpoint():
    assert "resumed" not in _error_of_log(3, start_step=0)
