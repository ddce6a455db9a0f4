"""A fresh run's parameters from pretrained weights (`config.init`): `init.mt5` (T5X mT5) and
`init.vit` (big_vision ViT `.npz`) merged into their towers, or `init.checkpoint`: another
run's parameters alone (its workdir or a `checkpoints/<step>` folder; its optimizer's state is
not read, so its optimizer may differ); the optimizer starts afresh.
"""

import os

import jax
from absl import logging

from model import upstream
from training import checkpointing
from training import run as run_lib


def _restore_other_run(path, abstract_params):
    """Params of another run's checkpoint: `path` is a workdir or a `checkpoints/<step>` folder."""
    path, step = os.path.abspath(path), None
    if os.path.basename(path).isdigit():  # .../checkpoints/<step>
        step, path = int(os.path.basename(path)), os.path.dirname(os.path.dirname(path))
    if not checkpointing.has_checkpoint(path):
        raise FileNotFoundError(f"init.checkpoint: no checkpoint in {path}/checkpoints")
    try:
        params, step = run_lib.Run.open(path).restore(step, params_only=True,
                                                      abstract=abstract_params)
    except (FileNotFoundError, ValueError, checkpointing.CheckpointError) as e:
        raise ValueError(f"init.checkpoint: {e}") from None
    logging.info("init.checkpoint: params of step %d of %s", step, path)
    return params


def initialize(params, init_config, abstract_state):
    """Returns `params` with the pretrained weights `init_config` names, in their shardings."""
    shardings = jax.tree.map(lambda x: x.sharding, abstract_state["params"])
    if init_config.get("checkpoint"):
        params = _restore_other_run(init_config.checkpoint, abstract_state["params"])
    if init_config.get("mt5") or init_config.get("vit"):
        params, reports = upstream.load_pretrained(jax.device_get(params), init_config)
        for report in reports:
            logging.info("%s", report)
        params = jax.device_put(params, shardings)
    return params
