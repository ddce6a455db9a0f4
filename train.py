"""Trains the ViT + mT5 captioner, running the evaluators of `config.evals` in the loop.

    python train.py --config configs/demo.py --workdir runs/demo \
        [--config.total_steps=300]

The phases of `train_and_evaluate` read top to bottom: config, mesh, data,
model and optimizer, state (fresh, or restored from the latest checkpoint in
the workdir), evaluators, loop. Restarting the same command resumes.
"""

import json
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from absl import app, flags, logging
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from ml_collections import config_flags

from data import pipeline, tokenizer
from eval import evaluators as evaluators_lib
from eval.evaluators import common as eval_common
from training import checkpointing, flops, losses, preemption, pretrained, run_config, schedules
from training import state as state_lib
from training.metrics import MetricsLogger, StepTimer

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for checkpoints and metrics.")
_ALLOW_CONFIG_CHANGE = flags.DEFINE_bool(
    "allow_config_change", False,
    "Resume even if model/optimizer/data fields differ from the workdir's config.json.")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None,
    "host:port of process 0 for jax.distributed; also read from JAX_COORDINATOR_ADDRESS. "
    "On Cloud TPU or SLURM pass --distributed instead and JAX finds it.")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in the job.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index.")
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False, "Call jax.distributed.initialize() with auto-detection.")


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite loss, incompatible checkpoint, ...)."""


# ------------------------------------------------------------------ step ----
def make_train_step(model, tx, schedule, config):
    """Returns train_step(state, batch, rng) -> (state, measurements)."""

    def loss_fn(params, batch, rng):
        decoder_inputs = losses.shift_right(batch["targets"])
        logits = model.apply({"params": params}, batch["image"], batch["prompt"],
                             decoder_inputs, train=True, rngs={"dropout": rng})
        return losses.cross_entropy(logits, batch["targets"],
                                    label_smoothing=config.label_smoothing,
                                    z_loss=config.z_loss)

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def accumulated_grads(params, batch, rng):
        """Sums token-weighted gradients over micro-batches, so the maths equal one big batch."""
        k = config.grad_accum_steps
        if k == 1:
            (_, aux), grads = grad_fn(params, batch, rng)
            return grads, aux
        # Micro-batch i takes rows i, i+k, ...: every data shard contributes to each one.
        micro = jax.tree.map(
            lambda x: x.reshape(x.shape[0] // k, k, *x.shape[1:]).swapaxes(0, 1), batch)

        def body(carry, inputs):
            i, mb = inputs
            (_, aux), grads = grad_fn(params, mb, jax.random.fold_in(rng, i))
            grads = jax.tree.map(lambda g: g * aux["weight"], grads)
            return jax.tree.map(jnp.add, carry, (grads, aux)), None

        zeros = (jax.tree.map(jnp.zeros_like, params),
                 {"loss_sum": 0.0, "z_loss_sum": 0.0, "weight": 0.0})
        (grads, aux), _ = jax.lax.scan(body, zeros, (jnp.arange(k), micro))
        grads = jax.tree.map(lambda g: g / aux["weight"], grads)
        return grads, aux

    def train_step(state, batch, rng):
        grads, aux = accumulated_grads(state["params"], batch, rng)
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        measurements = {
            "train/loss": aux["loss_sum"] / aux["weight"],
            "train/z_loss": aux["z_loss_sum"] / aux["weight"],
            "train/grad_norm": optax.global_norm(grads),
            "train/tokens": aux["weight"],
            "learning_rate": schedule(state["step"]),
        }
        new_state = {"params": params, "opt_state": opt_state, "step": state["step"] + 1}
        return new_state, measurements

    return train_step


def check_finite(step, measurements):
    """Stops training on a NaN/Inf loss or gradient, naming the step and the quantity."""
    bad = [k for k in ("train/loss", "train/grad_norm") if not np.isfinite(measurements[k])]
    if bad:
        raise TrainingError(
            f"step {step}: non-finite {', '.join(f'{k}={measurements[k]}' for k in bad)}; "
            "the last good checkpoint is kept in the workdir")


def build_evaluators(config, model, vocab):
    """The evaluators of `config.evals` that run in the loop (`every` > 0), by name.

    Raises:
        ValueError: a bad evaluator config, or a `config.checkpoint.best_metric`
            that none of them logs (with no evaluator in the loop, no best
            checkpoint is kept).
    """
    setup = eval_common.Setup.for_model(model, vocab, config.data, config.model.image_size)
    in_loop = [name for name, c in config.evals.items() if c.every]
    evaluators = evaluators_lib.build(config.evals, setup, names=in_loop)
    logged = [m for e in evaluators.values() for m in e.metric_names]
    best = config.checkpoint.best_metric
    if evaluators and best not in logged:
        raise ValueError(f"config.checkpoint.best_metric={best!r} is not logged by the in-loop "
                         f"evaluators ({', '.join(in_loop) or 'none'}); they log "
                         f"{', '.join(logged) or 'nothing'}")
    return evaluators


# ------------------------------------------------------------------ main ----
def check_config_matches_workdir(config, workdir, allow_change=False):
    """Refuses to resume a checkpoint whose config differs in a field that matters."""
    saved = run_config.load(workdir)
    if saved is None or not checkpointing.has_checkpoint(workdir):
        return
    changes = run_config.incompatible_changes(saved, config.to_dict())
    if changes and not allow_change:
        raise TrainingError(
            f"{workdir} holds checkpoints of a run with another config; changed fields:\n  "
            + "\n  ".join(changes)
            + "\nUse another --workdir, or pass --allow_config_change to resume anyway.")
    for change in changes:
        logging.warning("Config changed since the checkpoint (allowed): %s", change)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, allow_change=False):
    """Trains (or resumes) the run in `workdir`; returns the final state."""
    os.makedirs(workdir, exist_ok=True)
    check_config_matches_workdir(config, workdir, allow_change)
    if jax.process_index() == 0:
        run_config.save(workdir, config)
    mesh = state_lib.make_mesh(config.mesh)
    rules = state_lib.axis_rules(config)
    batch_sharding = NamedSharding(mesh, P("data"))
    if config.batch_size % (mesh.shape["data"] * config.grad_accum_steps):
        raise ValueError(
            f"config.batch_size={config.batch_size} must divide by data devices "
            f"({mesh.shape['data']}) x grad_accum_steps ({config.grad_accum_steps})")

    # Data.
    vocab = tokenizer.get_vocabulary(config.vocab.path)

    def train_batches(start_step):
        return pipeline.train_iterator(
            config.data, vocab, global_batch_size=config.batch_size,
            image_size=config.model.image_size, seed=config.seed, start_step=start_step,
            process_index=jax.process_index(), process_count=jax.process_count())

    # Model, optimizer and the shardings of their state.
    model = state_lib.create_model(config, vocab.vocab_size)
    tx, schedule = state_lib.create_optimizer(config)
    init_rng, train_rng = jax.random.split(jax.random.key(config.seed))
    abstract_state, shardings = state_lib.state_shardings(model, tx, mesh, rules)

    # State: the latest checkpoint of this workdir, or a fresh initialization.
    mngr = checkpointing.manager(workdir, keep=config.checkpoint.keep)
    best_mngr = checkpointing.best_manager(workdir, config.checkpoint.best_metric)
    state = checkpointing.restore(mngr, abstract_state)
    resumed = state is not None
    if not resumed:
        state = state_lib.init_state(model, tx, init_rng, shardings)
        state["params"] = pretrained.initialize(state["params"], config.init, abstract_state)
    start_step = int(state["step"])
    logging.info("%s at step %d; %d parameters", "Resumed" if resumed else "Starting",
                 start_step, sum(x.size for x in jax.tree.leaves(state["params"])))

    train_step = jax.jit(make_train_step(model, tx, schedule, config),
                         in_shardings=(shardings, batch_sharding, None),
                         out_shardings=(shardings, None), donate_argnums=0)
    evaluators = build_evaluators(config, model, vocab)
    logger = MetricsLogger(workdir, config.total_steps, start_step, resumed)

    def evaluate(step):
        """Runs the evaluators due at `step`; keeps the best checkpoint by its metric."""
        for evaluator in evaluators.values():
            if step == 0 or schedules.itstime(step, evaluator.every, config.total_steps):
                scores = evaluator.run(state["params"])
                logger.log(step, scores)
                if step > 0 and config.checkpoint.best_metric in scores:
                    checkpointing.save(best_mngr, step, state, metrics=scores)

    # Loop. Pending checkpoint writes finish even when training stops on an error.
    preemption.install()  # Here: libraries set up above may have taken SIGTERM.
    batches = None
    try:
        if start_step == 0:
            evaluate(0)
        batches = train_batches(start_step)
        compiled_step, timer = None, StepTimer(start_step)
        for step in range(start_step + 1, config.total_steps + 1):
            batch = {k: jax.make_array_from_process_local_data(batch_sharding, v)
                     for k, v in next(batches).items()}
            if compiled_step is None:
                # Compiled once (also to read its FLOPs), inside the mesh and axis
                # rules so that the model's logical activation constraints apply.
                with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
                    compiled_step = train_step.lower(state, batch, train_rng).compile()
                step_flops = flops.compiled_flops(compiled_step)
            state, measurements = compiled_step(state, batch, jax.random.fold_in(train_rng, step))
            if schedules.itstime(step, config.log_every, config.total_steps):
                measurements = jax.device_get(measurements)
                check_finite(step, measurements)
                measurements.update(timer.measure(step, config.batch_size, step_flops,
                                                  measurements["train/tokens"]))
                logger.log(step, measurements)
                logger.progress(step, measurements)
            if any(schedules.itstime(step, e.every, config.total_steps)
                   for e in evaluators.values()):
                evaluate(step)
                timer.restart(step)
            stop = preemption.should_stop()
            if stop or schedules.itstime(step, config.checkpoint.every, config.total_steps):
                check_finite(step, jax.device_get(measurements))
                checkpointing.save(mngr, step, state)
            if stop:
                logging.warning("Stop requested (SIGTERM): saved step %d, exiting.", step)
                break
    finally:
        mngr.wait_until_finished()
        best_mngr.wait_until_finished()
        logger.close()
        if batches is not None:
            batches.close()
    return state



def initialize_distributed():
    """Joins a multi-process job when flags or the environment describe one."""
    address = _COORDINATOR.value or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if address:
        jax.distributed.initialize(address, _NUM_PROCESSES.value, _PROCESS_ID.value)
    elif _DISTRIBUTED.value:
        jax.distributed.initialize()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if _WORKDIR.value is None:
        raise app.UsageError("--workdir is required")
    logging.info("Config:\n%s", json.dumps(_CONFIG.value.to_dict(), indent=2, default=str))
    initialize_distributed()
    train_and_evaluate(_CONFIG.value, _WORKDIR.value, _ALLOW_CONFIG_CHANGE.value)


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    app.run(main)
