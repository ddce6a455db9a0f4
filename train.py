"""Trains the ViT + mT5 captioner, running the evaluators of `config.evals` in the loop.

    python train.py --config configs/demo.py --workdir runs/demo \
        [--config.total_steps=300]

`train_and_evaluate` reads top to bottom: the checks of everything the user gave (nothing is
written in the workdir before they pass), the input (its worker processes start first and
make batches while the state is built and the step compiles), the state (the workdir's
newest checkpoint, or a fresh initialization, during which the step compiles in a thread),
the step, the outputs, and the loop: step, log, evaluate, checkpoint, stop
(training/actions.py). Running the same command again resumes, bit for bit. The console
shows progress, evaluations and the warnings that need the user (`--verbosity=0` brings back
the libraries' logs); bad input is one `error: ...` line and exit status 2.
"""

import concurrent.futures
import contextlib
import functools
import json
import os
import sys
import threading
import warnings

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
import optax
from absl import app, flags, logging
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from ml_collections import config_flags

import errors
from data import pipeline, tokenizer
from evaluation import evaluators as evaluators_lib
from evaluation.evaluators import caption_evaluator
from model import captioner
from training import (
    actions,
    checkpointing,
    compilation_cache,
    flops,
    losses,
    pretrained,
    run_config,
    train_input,
)
from training import state as state_lib
from training import workdir as workdir_lib
from training.actions import TrainingError
from training.metrics import (
    MetricsFileError,
    MetricsLogger,
    MetricsWriteError,
    check_metrics_file,
    metrics_lost_warning,
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


def _say(line):
    """A console line, from process 0."""
    if jax.process_index() == 0:
        print(line, flush=True)


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


# ---------------------------------------------------------------- checks ----
def check_config(config):
    """Checks every field of `config` that can be checked without loading anything, and
    that config.mesh fits the devices; returns the mesh.

    Raises:
        run_config.ConfigError: naming the field at fault.
    """
    run_config.check(config)
    try:
        evaluators_lib.check_configs(config.evals, config.checkpoint.best_metric)
    except ValueError as e:
        raise run_config.ConfigError(str(e)) from None
    try:
        mesh = state_lib.make_mesh(config.mesh)
    except ValueError as e:
        raise run_config.ConfigError(f"{e} here ({jax.devices()[0].platform})") from None
    if config.batch_size % (mesh.shape["data"] * config.grad_accum_steps):
        raise run_config.ConfigError(
            f"config.batch_size={config.batch_size} must divide by data devices "
            f"({mesh.shape['data']}) x grad_accum_steps ({config.grad_accum_steps})")
    return mesh


def load_vocabulary(config, build_data):
    """The vocabulary, once the training data it tokenizes is known to be built (or built
    now, with --build_data), before anything is compiled."""
    try:
        vocab = tokenizer.get_vocabulary(config.vocab.path)
    except (FileNotFoundError, ValueError) as e:
        raise TrainingError(f"config.vocab.path: {e}") from None
    run_config.check_vocab(config, vocab)
    try:
        pipeline.ensure_built(config.data, build=build_data and jax.process_count() == 1)
    except (OSError, errors.Error) as e:
        raise TrainingError(f"config.data: {e}") from None
    return vocab


def check_workdir(config, workdir, allow_change):
    """Reads what `workdir` holds of an earlier run: metrics.jsonl and config.json.

    Returns:
        (the last step whose records metrics.jsonl holds whole, or None when none is cut;
        the changed config fields that were allowed, for messages).
    """
    try:
        whole_through = check_metrics_file(workdir)
        if not checkpointing.has_checkpoint(workdir):
            return whole_through, []
        changes, warning_lines = run_config.check_resume(
            config, workdir, checkpointing.checkpoint_dir(workdir), allow_change)
    except (MetricsFileError, checkpointing.CheckpointError, run_config.ResumeRefused) as e:
        raise TrainingError(str(e)) from None
    for line in [*warning_lines, *metrics_lost_warning(workdir)]:
        _say(line)
    return whole_through, changes


def build_evaluators(config, model, vocab):
    """The evaluators of `config.evals` that run in the loop (`every` > 0), by name; they
    read their data now, so that a missing file stops the run before the workdir is written."""
    setup = caption_evaluator.Setup.for_model(model, vocab, config.data,
                                             config.model.image_size)
    in_loop = [name for name, c in config.evals.items() if c.every]
    try:
        return evaluators_lib.build(config.evals, setup, names=in_loop)
    except (FileNotFoundError, ValueError) as e:
        raise TrainingError(str(e)) from None


def prepare_workdir(workdir):
    """Creates `workdir`, checks that files can be written in it, and locks it (process 0;
    released by `train_and_evaluate` or by the process's end)."""
    try:
        workdir_lib.prepare(workdir, jax.process_index())
        note = workdir_lib.lock(workdir) if jax.process_index() == 0 else None
    except workdir_lib.WorkdirError as e:
        raise TrainingError(str(e)) from None
    if note:
        _say(note)


# ----------------------------------------------------------- state, step ----
def restore_or_initialize(config, workdir, model, tx, abstract_state, rng, whole_through,
                          changes):
    """The newest readable checkpoint of `workdir` (up to step `whole_through`, see
    `check_workdir`), or a fresh (pretrained) initialization; returns (state, step)."""
    try:
        state, step = checkpointing.restore_latest(workdir, abstract_state, whole_through)
    except checkpointing.IncompatibleCheckpoint as e:
        hint = f" (changed config fields: {'; '.join(changes)})" if changes else ""
        raise TrainingError(f"{e}{hint}; nothing in {workdir} was changed") from None
    except checkpointing.CheckpointError as e:
        raise TrainingError(str(e)) from None
    # The devices too: the libraries' warnings (a GPU that JAX cannot use) are off.
    size = (f"{sum(x.size for x in jax.tree.leaves(abstract_state['params'])) / 1e6:.1f}M "
            f"parameters, {jax.device_count()} {jax.devices()[0].platform} device(s)")
    if state is not None:
        _say(f"Resuming {workdir} at step {step} of {config.total_steps} ({size})")
        return state, step
    _say(f"Starting {workdir} at step 0 of {config.total_steps} ({size})")
    shardings = jax.tree.map(lambda x: x.sharding, abstract_state)  # Of state_shardings.
    with compilation_cache.watch() as compiled:
        state = state_lib.init_state(model, tx, rng, shardings)
    _say(f"Initialized the parameters in {compiled}")
    try:
        state["params"] = pretrained.initialize(state["params"], config.init, abstract_state)
    except (FileNotFoundError, ValueError) as e:
        raise TrainingError(str(e)) from None
    return state, 0


STEP_FIELDS = run_config.STEP_FIELDS  # The config fields the step reads.


@functools.lru_cache(maxsize=4)
def jitted_train_step(model, mesh, step_config):
    """The train step jitted with the state's and the batch's shardings, for a FrozenConfigDict
    of the STEP_FIELDS; cached, so that a process that trains again (a test, a notebook)
    traces it once."""
    tx, schedule = state_lib.create_optimizer(step_config)
    _, shardings = state_lib.state_shardings(model, tx, mesh, state_lib.axis_rules(step_config))
    return jax.jit(make_train_step(model, tx, schedule, step_config),
                   in_shardings=(shardings, NamedSharding(mesh, P("data")), None),
                   out_shardings=(shardings, None), donate_argnums=0)


def abstract_batch(config, sharding):
    """The global training batches' shapes, dtypes and sharding, to compile the step for."""
    return {name: jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
            for name, (shape, dtype) in pipeline.batch_shapes(
                config.batch_size, config.model.image_size, config.data).items()}


def compile_train_step(config, model, mesh, abstract_state, rng):
    """Starts compiling the train step for the state's and the batches' shapes; returns a
    function that waits for it and returns (the compiled step, its compile seconds).

    In a thread, so that a fresh run's two compiles overlap (BB's cold launch on an H100: 62.3
    -> 52.9 s); inside the mesh and axis rules, for the model's activation constraints.
    """
    step_config = ml_collections.FrozenConfigDict({k: config[k] for k in STEP_FIELDS})
    batch = abstract_batch(config, NamedSharding(mesh, P("data")))
    outcome = concurrent.futures.Future()

    def compile_step():
        try:
            with compilation_cache.watch() as compiled, jax.set_mesh(mesh), \
                    nn.logical_axis_rules(state_lib.axis_rules(config)):
                step = jitted_train_step(model, mesh, step_config).lower(
                    abstract_state, batch, rng).compile()
            outcome.set_result((step, compiled))
        except BaseException as e:  # noqa: BLE001  Raised in the caller's thread by wait().
            outcome.set_exception(e)

    # A daemon: a run stopped meanwhile (Ctrl-C, a bad pretrained checkpoint) does not wait.
    threading.Thread(target=compile_step, name="compile_train_step", daemon=True).start()

    def wait():
        step, compiled = outcome.result()
        _say(f"Compiled the train step in {compiled}")
        return step, compiled.seconds

    return wait


def open_outputs(config, workdir, start_step):
    """The metrics logger (metrics.jsonl repaired to `start_step`), config.json, and the
    checkpoint savers (regular, best); from here on the workdir is this run's."""
    try:
        logger = MetricsLogger(workdir, config.total_steps, start_step, start_step > 0,
                               sync_every=config.checkpoint.every)
    except (MetricsFileError, MetricsWriteError) as e:
        raise TrainingError(str(e)) from None
    if jax.process_index() == 0:
        run_config.save(workdir, config)
    saver = checkpointing.Saver(checkpointing.manager(workdir, keep=config.checkpoint.keep))
    best_saver = checkpointing.Saver(
        checkpointing.best_manager(workdir, config.checkpoint.best_metric))
    return logger, saver, best_saver


# ------------------------------------------------------------------ main ----
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, allow_change=False,
                       compilation_cache_dir=None, build_data=False):
    """Trains (or resumes) the run in `workdir`; returns the final state.

    SIGINT and SIGTERM stop it as training/preemption.py says (train.py's __main__ routes
    them there before its imports; for other callers this does, for the call's duration).

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
    with contextlib.ExitStack() as cleanup:  # Run backwards when the call ends, however.
        if preemption.install():
            cleanup.callback(preemption.uninstall)
        cleanup.callback(workdir_lib.release, workdir)  # A no-op unless it was locked.
        return _train_and_evaluate(config, workdir, allow_change, compilation_cache_dir,
                                   build_data, cleanup)


def _train_and_evaluate(config, workdir, allow_change, compilation_cache_dir, build_data,
                        cleanup):
    """`train_and_evaluate`; `cleanup` (an ExitStack) closes what it opens."""
    # Checks: everything the user gave is read before anything is written in the workdir.
    mesh = check_config(config)
    vocab = load_vocabulary(config, build_data)
    whole_through, changes = check_workdir(config, workdir, allow_change)
    model = captioner.from_config(config.model, vocab.vocab_size)
    evaluators = build_evaluators(config, model, vocab)
    prepare_workdir(workdir)
    compilation_cache.enable_from_flag(compilation_cache_dir, workdir)

    # Input first: a resumed run's first step is known from the checkpoints' folder names.
    start_step = checkpointing.resume_step(workdir, whole_through)
    batches = cleanup.enter_context(train_input.Batches(config, vocab,
                                                        NamedSharding(mesh, P("data")), start_step))

    # State: the workdir's newest checkpoint, or a fresh initialization.
    tx, _ = state_lib.create_optimizer(config)
    abstract_state, _ = state_lib.state_shardings(model, tx, mesh, state_lib.axis_rules(config))
    init_rng, train_rng = jax.random.split(jax.random.key(config.seed))
    # A fresh run compiles its step while the state initializes; a resumed one after the
    # restore (a checkpoint may be unreadable, and an exit then should not leave a thread).
    compiled_step = (compile_train_step(config, model, mesh, abstract_state, train_rng)
                     if start_step == 0 else None)
    state, start_step = restore_or_initialize(config, workdir, model, tx, abstract_state,
                                              init_rng, whole_through, changes)
    batches.restart(start_step)  # Moved back only when a damaged checkpoint was set aside.
    train_step = compile_s = None
    if start_step < config.total_steps:
        compiled_step = compiled_step or compile_train_step(config, model, mesh,
                                                            abstract_state, train_rng)
        train_step, compile_s = compiled_step()
        batches.peek()  # Bad data stops the run here, before any evaluation.

    # Outputs and the loop's actions. Pending checkpoint writes finish even after an error.
    logger, saver, best_saver = open_outputs(config, workdir, start_step)
    cleanup.callback(logger.close)
    cleanup.callback(checkpointing.wait_all, saver, best_saver)
    step_flops = flops.train_step_flops(model.config, config.batch_size,
                                        config.data.max_prompt_len, config.data.max_target_len)
    log = actions.Log(logger, config, start_step, step_flops)
    evaluate = actions.Evaluate(evaluators, logger, best_saver, config)
    checkpoint = actions.Checkpoint(saver, config, start_step)
    stop = actions.Stop(saver, best_saver)

    preemption.reinstall()  # Libraries set up above may have taken the signals.
    if start_step == 0:
        evaluate(0, state)
    if train_step is not None:
        logger.log(start_step + 1, {"perf/compile_s": compile_s})
        log.restart_clock(start_step)
    return train_loop(state, start_step, config.total_steps, train_step, batches, train_rng,
                      (log, evaluate, checkpoint, stop))


def train_loop(state, start_step, total_steps, train_step, batches, rng, periodic):
    """Trains from `start_step` to `total_steps`; returns the final state.

    After each step the periodic actions: log (its measurements are fetched once the next
    step is queued), evaluate, checkpoint, and stop when asked to (Ctrl-C, SIGTERM), the
    step saved first.
    """
    log, evaluate, checkpoint, stop = periodic
    measurements = None
    for step in range(start_step + 1, total_steps + 1):
        try:
            batch = batches.next(step)
        except TrainingError as e:  # Bad data: every completed step is kept.
            log.flush()
            raise checkpoint.before_error(step - 1, state, measurements, e) from None
        with jax.transfer_guard_device_to_host("disallow"):  # Nothing here waits for it.
            state, measurements = train_step(state, batch, jax.random.fold_in(rng, step))
        preemption.started_training()  # From here on a signal saves a step.
        log(step, measurements)
        checkpoint.poll()  # A failed background save stops the run now, not at the next.
        evaluate.poll()
        stopping = stop.requested()
        evaluating, saving = evaluate.due(step), stopping or checkpoint.due(step)
        if evaluating or saving:
            log.flush()  # They wait for the step anyway.
        if evaluating:
            evaluate(step, state)
            log.restart_clock(step)
        if saving:
            checkpoint(step, state, measurements)
        if stopping:
            stop(step)
            break
    log.flush()
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
    if not flags.FLAGS["verbosity"].present:  # The libraries' logs and warnings off.
        logging.set_verbosity(logging.ERROR)
        warnings.simplefilter("ignore")
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
