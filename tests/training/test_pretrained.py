"""training/pretrained.py: `config.init.checkpoint` takes another run's parameters alone."""

import jax
import ml_collections
import numpy as np
import pytest

import train
from training import checkpointing, pretrained
from training import run as run_lib

# Another Adafactor setting than the source run's: its optimizer state has another structure.
NO_CLIPPING = {"optimizer.clipping_threshold": None}


def _equal(a, b):
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b),
                                             strict=True))


def test_a_finetune_with_another_optimizer_setting_starts_from_the_sources_parameters(
        four_step_run, tmp_path):
    config = four_step_run.config(**NO_CLIPPING, **{
        "init.checkpoint": four_step_run.workdir, "total_steps": 0,
        "evals.xm3600.every": 0, "checkpoint.every": 0})
    state = train.train_and_evaluate(config, str(tmp_path / "finetune"))
    assert _equal(jax.device_get(state["params"]), four_step_run.state(4)["params"])


def test_a_finetune_from_a_checkpoint_folder_takes_that_steps_parameters(four_step_run,
                                                                         tmp_path):
    source = f"{checkpointing.checkpoint_dir(four_step_run.workdir)}/2"
    config = four_step_run.config(**NO_CLIPPING, **{
        "init.checkpoint": source, "total_steps": 0, "evals.xm3600.every": 0,
        "checkpoint.every": 0})
    state = train.train_and_evaluate(config, str(tmp_path / "finetune"))
    assert _equal(jax.device_get(state["params"]), four_step_run.state(2)["params"])


def test_read_refuses_a_run_of_another_model_from_its_metadata(four_step_run):
    source = run_lib.Run.open(four_step_run.workdir)
    wider = run_lib.Run("elsewhere", four_step_run.config(**{"model.t5.emb_dim": 48}),
                        source.vocab)
    abstract = wider.abstract_params(sharded=False)
    init = ml_collections.ConfigDict({"checkpoint": four_step_run.workdir})
    with pytest.raises(ValueError, match=r"^init.checkpoint: checkpoint .*/checkpoints/4 "
                                         r"\(step 4\) does not fit the model of the config: "):
        pretrained.read(init, abstract)


def test_read_takes_a_run_of_the_same_model(four_step_run):
    abstract = run_lib.Run.open(four_step_run.workdir).abstract_params(sharded=False)
    init = ml_collections.ConfigDict({"checkpoint": four_step_run.workdir})
    assert pretrained.read(init, abstract) == {}
