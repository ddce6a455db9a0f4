"""Trains the ViT + mT5 captioner, running the evaluators of `config.evals` in the loop.

    python train.py --config configs/demo.py --workdir runs/demo \
        [--config.total_steps=300]

The phases of `train_and_evaluate` read top to bottom: config, mesh, data,
model and optimizer, state (fresh, or restored from the latest checkpoint in
the workdir), evaluators, loop. Restarting the same command resumes. The
console shows progress, evaluations and warnings that need the user
(`--verbosity=0` brings back the libraries' INFO logs); bad input is one
`error: ...` line and exit status 2, and nothing in the workdir is changed
before the run has really started.
"""

import json
import os
import sys

from training import preemption

if __name__ == "__main__":  # Before the heavy imports: Ctrl-C during them is one line too.
    preemption.install()
    # One write per console line, even under PYTHONUNBUFFERED (print writes a line and its
    # newline apart there), so that a signal's message never lands inside a progress line.
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True, write_through=False)

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

import errors
from data import images as image_lib
from data import pipeline, tokenizer
from data.pipeline import sources
from evaluation import evaluators as evaluators_lib
from evaluation.evaluators import common as eval_common
from training import (
    checkpointing,
    compilation_cache,
    flops,
    losses,
    preemption,
    pretrained,
    run_config,
    schedules,
)
from training import state as state_lib
from training import workdir as workdir_lib
from training.metrics import (
    MetricsFileError,
    MetricsLogger,
    MetricsWriteError,
    StepTimer,
    check_metrics_file,
)

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for checkpoints and metrics.")
_ALLOW_CONFIG_CHANGE = flags.DEFINE_bool(
    "allow_config_change", False,
    "Resume even if model/optimizer/data fields differ from the workdir's config.json, or "
    "adopt the command line's config when config.json beside the checkpoints is missing or "
    "unreadable.")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None,
    "host:port of process 0 for jax.distributed; also read from JAX_COORDINATOR_ADDRESS. "
    "On Cloud TPU or SLURM pass --distributed instead and JAX finds it.")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in the job.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index.")
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False, "Call jax.distributed.initialize() with auto-detection.")
_BUILD_DATA = flags.DEFINE_bool(
    "build_data", False,
    "Build what config.data names but the data directory lacks (languages, images) before "
    "training, after checking the disk's free space; without it that is an error naming the "
    "python -m data.build command. Single-process runs only.")
_COMPILATION_CACHE = flags.DEFINE_string(
    "compilation_cache", None,
    "JAX's persistent compilation cache (a folder every host sees); default: "
    "$JAX_COMPILATION_CACHE_DIR, else <workdir>/compilation_cache. 'none' turns it off.")


class TrainingError(errors.RunError):
    """Training cannot go on (non-finite loss, incompatible checkpoint, ...)."""


# ------------------------------------------------------------------ step ----
def make_train_step(model, tx, schedule, config):
    """Returns train_step(state, batch, rng) -> (state, measurements)."""

    def loss_fn(params, batch, rng):
        # The fused loss never holds the float32 logits [batch, length, vocab] whole.
        return losses.captioner_loss(model, params, batch, rng,
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


def check_config(config):
    """Checks every field of `config` that can be checked without loading anything.

    Raises:
        run_config.ConfigError: naming the field at fault.
    """
    run_config.check(config)
    try:
        evaluators_lib.check_configs(config.evals, config.checkpoint.best_metric)
    except ValueError as e:
        raise run_config.ConfigError(str(e)) from None


def build_evaluators(config, model, vocab):
    """The evaluators of `config.evals` that run in the loop (`every` > 0), by name."""
    setup = eval_common.Setup.for_model(model, vocab, config.data, config.model.image_size)
    in_loop = [name for name, c in config.evals.items() if c.every]
    try:
        return evaluators_lib.build(config.evals, setup, names=in_loop)
    except (FileNotFoundError, ValueError) as e:
        raise TrainingError(str(e)) from None


# ------------------------------------------------------------------ main ----
def check_config_matches_workdir(config, workdir, allow_change=False):
    """Refuses to resume a checkpoint whose config differs in a field that matters.

    Checkpoints without a readable config.json beside them are refused too (nothing
    could be checked against them) unless `allow_change` adopts the command line's.

    Returns:
        The changed fields (allowed), for messages.
    """
    try:
        has_checkpoint = checkpointing.has_checkpoint(workdir)
    except checkpointing.CheckpointError as e:
        raise TrainingError(str(e)) from None
    if not has_checkpoint:
        return []
    try:
        saved = run_config.load(workdir)
        if saved is None:
            raise run_config.SavedConfigError(
                f"{run_config.path(workdir)}: missing beside the checkpoints in "
                f"{checkpointing.checkpoint_dir(workdir)}")
    except run_config.SavedConfigError as e:
        if not allow_change:
            raise TrainingError(
                f"{e}; the checkpoints cannot be checked against the config. Restore it, or "
                f"pass --allow_config_change to resume with the command line's config") \
                from None
        logging.warning("%s; resuming with the command line's config (allowed)", e)
        return []
    changes = run_config.incompatible_changes(saved, config.to_dict())
    if changes and not allow_change:
        raise TrainingError(
            f"{workdir} holds checkpoints of a run with another config; changed fields: "
            + "; ".join(changes)
            + ". Use another --workdir, or pass --allow_config_change to resume anyway.")
    for change in changes:
        logging.warning("Config changed since the checkpoint (allowed): %s", change)
    return changes


def prepare_workdir(workdir):
    """Creates `workdir`, checks that files can be written in it, and locks it (process 0).

    The lock (training/workdir.py) is released when `train_and_evaluate` returns or
    raises, or by the process's end.
    """
    try:
        workdir_lib.prepare(workdir, jax.process_index())
        note = workdir_lib.lock(workdir) if jax.process_index() == 0 else None
    except workdir_lib.WorkdirError as e:
        raise TrainingError(str(e)) from None
    if note:
        print(note, flush=True)


def restore_or_initialize(config, workdir, model, tx, abstract_state, shardings, rng, changes):
    """The latest readable checkpoint of `workdir`, or a fresh (pretrained) initialization.

    Returns:
        (state, resumed).
    """
    try:
        state, _ = checkpointing.restore_latest(workdir, abstract_state)
    except checkpointing.IncompatibleCheckpoint as e:
        hint = f" (changed config fields: {'; '.join(changes)})" if changes else ""
        raise TrainingError(f"{e}{hint}; nothing in {workdir} was changed") from None
    except checkpointing.CheckpointError as e:
        raise TrainingError(str(e)) from None
    num_params = sum(x.size for x in jax.tree.leaves(abstract_state["params"]))
    say = print if jax.process_index() == 0 else (lambda *a, **k: None)
    if state is not None:
        say(f"Resuming {workdir} at step {int(state['step'])} of {config.total_steps} "
            f"({num_params / 1e6:.1f}M parameters)", flush=True)
        return state, True
    say(f"Starting {workdir} at step 0 of {config.total_steps} ({num_params / 1e6:.1f}M "
        f"parameters)", flush=True)
    with compilation_cache.watch() as compiled:
        state = state_lib.init_state(model, tx, rng, shardings)
    say(f"Initialized the parameters in {compiled}", flush=True)
    try:
        state["params"] = pretrained.initialize(state["params"], config.init, abstract_state)
    except (FileNotFoundError, ValueError) as e:
        raise TrainingError(str(e)) from None
    return state, False


def _data_error(error, data_config, where="config.data"):
    """A TrainingError for a data error of the training batches, saying what to do."""
    if not isinstance(error, image_lib.ImageError):
        return TrainingError(f"{where}: {error}")
    if data_config.get("reader", None) == "files":  # Reads the files as they are: no skip.
        return TrainingError(f"{where}: {error}; replace or delete that file (the files "
                             f"reader leaves out images whose file is missing)")
    return TrainingError(f"{where}: {error}; to drop such images, pass "
                         f"--config.data.corrupt_images=skip")


def _batches_or_error(make_batches, start_step, data_config, batches=None):
    """The training iterator (its workers started), or with `batches` its first batch; bad
    data files as a TrainingError.

    With data.reader=files the iterator decodes every training image first
    (data/pipeline/), so a corrupt one stops the run here, before any evaluation.
    """
    try:
        return make_batches(start_step) if batches is None else next(batches)
    except (OSError, errors.Error) as e:  # Missing or unbuilt files, no disk space, bad data.
        error = _data_error(e, data_config)
    if batches is not None:
        batches.close()
    raise error


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, allow_change=False,
                       compilation_cache_dir=None, build_data=False):
    """Trains (or resumes) the run in `workdir`; returns the final state.

    SIGINT and SIGTERM stop it as training/preemption.py says (train.py's
    __main__ routes them there before its imports; for other callers this
    does, for the call's duration).

    Args:
        config: the run's config.
        workdir: the run's folder.
        allow_change: resume although fields that matter differ from config.json.
        compilation_cache_dir: JAX's persistent compilation cache (default:
            `compilation_cache.default_cache_dir(workdir)`; "none": off).
        build_data: build the missing parts of the training data first (--build_data).

    Raises:
        run_config.ConfigError: a config field is wrong (nothing was written).
        TrainingError: the run cannot start or go on (the message says why).
    """
    installed = preemption.install()
    try:
        return _train_and_evaluate(config, workdir, allow_change, compilation_cache_dir,
                                   build_data)
    finally:
        workdir_lib.release(workdir)  # A no-op unless prepare_workdir took the lock.
        if installed:
            preemption.uninstall()


def _train_and_evaluate(config, workdir, allow_change, compilation_cache_dir, build_data):
    """`train_and_evaluate`, with the signals routed and the workdir's lock released after."""
    # Every check of the config, its devices, vocabulary and data comes before anything is
    # written in the workdir: a bad value never leaves a new, empty one behind.
    check_config(config)
    try:
        mesh = state_lib.make_mesh(config.mesh)
    except ValueError as e:
        raise run_config.ConfigError(f"{e} here ({jax.devices()[0].platform})") from None
    rules = state_lib.axis_rules(config)
    batch_sharding = NamedSharding(mesh, P("data"))
    if config.batch_size % (mesh.shape["data"] * config.grad_accum_steps):
        raise run_config.ConfigError(
            f"config.batch_size={config.batch_size} must divide by data devices "
            f"({mesh.shape['data']}) x grad_accum_steps ({config.grad_accum_steps})")

    # Data.
    try:
        vocab = tokenizer.get_vocabulary(config.vocab.path)
    except (FileNotFoundError, ValueError) as e:
        raise TrainingError(f"config.vocab.path: {e}") from None
    run_config.check_vocab(config, vocab)
    try:  # Data that is not built stops the run (or is built) before anything is compiled.
        sources.ensure_built(config.data, build=build_data and jax.process_count() == 1)
    except (OSError, errors.Error) as e:
        raise TrainingError(f"config.data: {e}") from None
    try:
        check_metrics_file(workdir)
    except MetricsFileError as e:
        raise TrainingError(str(e)) from None
    changes = check_config_matches_workdir(config, workdir, allow_change)
    # The evaluators read their data now (nothing is compiled yet): a missing file stops
    # the run before the workdir is written.
    model = state_lib.create_model(config, vocab.vocab_size)
    evaluators = build_evaluators(config, model, vocab)

    prepare_workdir(workdir)
    compilation_cache.enable_from_flag(compilation_cache_dir, workdir)

    def train_batches(start_step):
        return pipeline.train_iterator(
            config.data, vocab, global_batch_size=config.batch_size,
            image_size=config.model.image_size, seed=config.seed, start_step=start_step,
            process_index=jax.process_index(), process_count=jax.process_count())

    # The optimizer and the shardings of the state. MFU counts the model's FLOPs
    # (training/flops.py), not what remat or XLA adds.
    step_flops = flops.train_step_flops(model.config, config.batch_size,
                                        config.data.max_prompt_len, config.data.max_target_len)
    tx, schedule = state_lib.create_optimizer(config)
    init_rng, train_rng = jax.random.split(jax.random.key(config.seed))
    abstract_state, shardings = state_lib.state_shardings(model, tx, mesh, rules)

    # The input workers start before the model is initialized, at the latest checkpoint's
    # step, so that the first batch is ready when the first step compiles.
    latest_step = max(checkpointing.steps(workdir), default=0)
    batches = _batches_or_error(train_batches, latest_step, config.data)
    # State: the latest checkpoint of this workdir, or a fresh initialization.
    try:
        state, resumed = restore_or_initialize(config, workdir, model, tx, abstract_state,
                                               shardings, init_rng, changes)
    except BaseException:
        batches.close()
        raise
    start_step = int(state["step"])
    if start_step != latest_step:  # The latest checkpoint was unreadable.
        batches.close()
        batches = _batches_or_error(train_batches, start_step, config.data)

    train_step = jax.jit(make_train_step(model, tx, schedule, config),
                         in_shardings=(shardings, batch_sharding, None),
                         out_shardings=(shardings, None), donate_argnums=0)
    # Bad data shows before the first evaluation, not after it.
    first_batch = _batches_or_error(train_batches, start_step, config.data, batches)
    try:
        logger = MetricsLogger(workdir, config.total_steps, start_step, resumed,
                               sync_every=config.checkpoint.every)
    except (MetricsFileError, MetricsWriteError) as e:
        batches.close()
        raise TrainingError(str(e)) from None
    # Everything the user gave has been read: from here on the workdir is this run's.
    if jax.process_index() == 0:
        run_config.save(workdir, config)
    saver = checkpointing.Saver(checkpointing.manager(workdir, keep=config.checkpoint.keep))
    best_saver = checkpointing.Saver(
        checkpointing.best_manager(workdir, config.checkpoint.best_metric))

    def evaluate(step):
        """Runs the evaluators due at `step`; keeps the best checkpoint by its metric."""
        for evaluator in evaluators.values():
            if step == 0 or schedules.itstime(step, evaluator.every, config.total_steps):
                scores = evaluator.run(state["params"])
                logger.log(step, scores)
                if step > 0 and config.checkpoint.best_metric in scores:
                    best_saver.save(step, state, metrics=scores)

    def next_batch(step):
        try:
            local = next(batches)
        except (OSError, errors.Error) as e:  # A file changed or went away while training.
            raise _data_error(e, config.data, where=f"step {step}") from None
        return {k: jax.make_array_from_process_local_data(batch_sharding, v)
                for k, v in local.items()}

    def save_before_error(step, measurements, error):
        """Saves the last completed `step` (unless saved or non-finite); names it in `error`.

        Single-process runs only: a save is collective, and the other processes are
        already in the next step.
        """
        if step in (start_step, saved_step) or jax.process_count() > 1:
            return error
        try:
            check_finite(step, jax.device_get(measurements))
        except TrainingError:
            return error  # The last good checkpoint stays the latest.
        saver.save(step, state)
        saver.wait()
        return TrainingError(f"{error}; saved step {step} in "
                             f"{checkpointing.checkpoint_dir(workdir)} first")

    def log_train(step, measurements):
        """Fetches a step's measurements (waiting for the step), checks and logs them."""
        measurements = jax.device_get(measurements)
        check_finite(step, measurements)
        measurements.update(timer.measure(step, config.batch_size, step_flops,
                                          measurements["train/tokens"]))
        logger.log(step, measurements)
        logger.progress(step, measurements)

    # Loop. Pending checkpoint writes finish even when training stops on an error.
    preemption.reinstall()  # Here: libraries set up above may have taken the signals.
    try:
        if start_step == 0:
            evaluate(0)
        compiled_step, timer = None, StepTimer(start_step)
        # A log step's measurements are fetched once the next step is queued, so that the
        # device never waits while the host logs, loads a batch and sends it.
        pending, saved_step, measurements = None, start_step, None
        for step in range(start_step + 1, config.total_steps + 1):
            if first_batch is not None:
                batch, first_batch = {k: jax.make_array_from_process_local_data(
                    batch_sharding, v) for k, v in first_batch.items()}, None
            else:
                try:
                    batch = next_batch(step)
                except TrainingError as e:  # Bad data: keep every completed step.
                    if pending:
                        log_train(*pending)
                    raise save_before_error(step - 1, measurements, e) from None
            # Nothing here may wait for the device (no implicit transfer to the host).
            with jax.transfer_guard_device_to_host("disallow"):
                if compiled_step is None:
                    # Compiled ahead of the first step inside the mesh and axis rules, so
                    # that the model's logical activation constraints apply.
                    with compilation_cache.watch() as compiled, jax.set_mesh(mesh), \
                            nn.logical_axis_rules(rules):
                        compiled_step = train_step.lower(state, batch, train_rng).compile()
                    if jax.process_index() == 0:
                        print(f"Compiled the train step in {compiled}", flush=True)
                    logger.log(step, {"perf/compile_s": compiled.seconds})
                    timer.restart(step - 1)
                state, measurements = compiled_step(state, batch,
                                                    jax.random.fold_in(train_rng, step))
            preemption.started_training()  # From here on a signal saves a step.
            if pending:
                log_train(*pending)
            pending = (step, measurements) if schedules.itstime(
                step, config.log_every, config.total_steps) else None
            evaluating = any(schedules.itstime(step, e.every, config.total_steps)
                             for e in evaluators.values())
            saver.poll()  # A failed background save stops the run now, not at the next save.
            best_saver.poll()
            stop = preemption.should_stop()
            saving = stop or schedules.itstime(step, config.checkpoint.every, config.total_steps)
            if pending and (evaluating or saving):  # These wait for the step anyway.
                log_train(*pending)
                pending = None
            if evaluating:
                evaluate(step)
                timer.restart(step)
            if saving:
                check_finite(step, jax.device_get(measurements))
                saver.save(step, state)
                saved_step = step
            if stop:
                saver.wait()
                best_saver.wait()
                preemption.finished()  # A Ctrl-C from now on exits 0: the step is saved.
                if jax.process_index() == 0:
                    print(f"Stopped by {preemption.reason()}: saved step {step} in "
                          f"{checkpointing.checkpoint_dir(workdir)}; run the same command to "
                          f"resume.", flush=True)
                break
        if pending:
            log_train(*pending)
    finally:
        try:
            checkpointing.wait_all(saver, best_saver)
        finally:
            logger.close()
            batches.close()
    return state



def initialize_distributed():
    """Joins a multi-process job when flags or the environment describe one."""
    address = _COORDINATOR.value or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if address:
        jax.distributed.initialize(address, _NUM_PROCESSES.value, _PROCESS_ID.value)
    elif _DISTRIBUTED.value:
        jax.distributed.initialize()


def parse_flags(argv):
    """absl's flag parsing; a bad flag or override or a stray argument is one `error:` line
    (exit status 2) before anything starts (benchmarks/train_step.py parses with it too)."""
    try:
        rest = run_config.parse_flags(flags.FLAGS, argv)
    except run_config.ConfigError as e:
        errors.fail(e)
    if len(rest) > 1:
        errors.fail(f"unexpected argument {rest[1]!r}: train.py takes only flags "
                    f"(--name=value; see --help)")
    return rest


def main(argv):
    del argv  # parse_flags refused any positional argument.
    if _WORKDIR.value is None:
        errors.fail("--workdir is required")
    if not flags.FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # Library INFO logs off unless asked for.
    logging.info("Config:\n%s", json.dumps(_CONFIG.value.to_dict(), indent=2, default=str))
    try:
        initialize_distributed()
        train_and_evaluate(_CONFIG.value, _WORKDIR.value, _ALLOW_CONFIG_CHANGE.value,
                           _COMPILATION_CACHE.value, build_data=_BUILD_DATA.value)
    except errors.Error as e:  # Bad config or data, a full disk, ...: one line.
        errors.fail(e)
    preemption.finished()  # Done and saved: a late Ctrl-C exits 0, not 130.


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    app.run(main, flags_parser=parse_flags)
