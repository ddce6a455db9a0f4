"""A fresh run's parameters from pretrained weights (`config.init`): `init.mt5` (T5X mT5) and
`init.vit` (big_vision ViT `.npz`) merged into their towers, or `init.checkpoint`: another
run's parameters alone (its workdir or a `checkpoints/<step>` folder; its optimizer's state is
not read, so its optimizer may differ); the optimizer starts afresh. `read` reads and checks
them before the run writes anything; `initialize` merges them.
"""

import os

import jax
from absl import logging

import errors
from model import upstream
from training import checkpointing
from training import run as run_lib


def _other_run(path):
    """(workdir, step or None) of `init.checkpoint`: a workdir or a `checkpoints/<step>` folder."""
    path, step = os.path.abspath(path), None
    if os.path.basename(path).isdigit():  # .../checkpoints/<step>
        step, path = int(os.path.basename(path)), os.path.dirname(os.path.dirname(path))
    if not checkpointing.steps(path):
        raise FileNotFoundError(f"init.checkpoint: no checkpoint in {path}/checkpoints")
    return path, step


def check_other_run(path, abstract_params=None):
    """Checks `init.checkpoint` from its metadata: a checkpoint is there and, given
    `abstract_params`, its parameters have their shapes (FileNotFoundError / ValueError)."""
    path, step = _other_run(path)
    if abstract_params is not None:
        with errors.reraised(ValueError, (FileNotFoundError, checkpointing.CheckpointError),
                             "init.checkpoint: "):
            checkpointing.check_params(path, step, abstract_params)


def read(init_config, abstract_params):
    """The weights `init_config` names, read and checked against `abstract_params` (for
    `initialize`); FileNotFoundError / ValueError start with "init.<field>:"."""
    if init_config.get("checkpoint"):  # Read at `initialize`.
        check_other_run(init_config.checkpoint, abstract_params)
    weights = upstream.read_pretrained(init_config)
    upstream.load_pretrained(abstract_params, init_config, check_only=True, read=weights)
    return weights


def initialize(params, init_config, abstract_state, weights=None):
    """Returns `params` with the pretrained weights `init_config` names, in their shardings;
    `weights`: what `read` returned (else they are read now)."""
    shardings = jax.tree.map(lambda x: x.sharding, abstract_state["params"])
    if init_config.get("checkpoint"):  # Another run's parameters alone.
        path, step = _other_run(init_config.checkpoint)
        with errors.reraised(ValueError, (FileNotFoundError, ValueError,
                                          checkpointing.CheckpointError), "init.checkpoint: "):
            params, step = run_lib.Run.open(path).restore(step, abstract=abstract_state["params"])
        logging.info("init.checkpoint: params of step %d of %s", step, path)
    if init_config.get("mt5") or init_config.get("vit"):
        params, reports = upstream.load_pretrained(jax.device_get(params), init_config,
                                                   read=weights)
        for report in reports:
            logging.info("%s", report)
        params = jax.device_put(params, shardings)
    return params
