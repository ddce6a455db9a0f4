"""Trains the ViT + mT5 captioner, running the evaluators of `config.evals` in the loop.

    python train.py --config configs/demo.py --workdir runs/demo [--config.total_steps=300]

All input is checked before anything is written; the same command again resumes, bit for bit.
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
import ml_collections
from absl import app, flags, logging
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from ml_collections import config_flags

import errors
from data import pipeline
from evaluation import evaluators as evaluators_lib
from evaluation.evaluators import caption_evaluator
from training import (
    actions,
    checkpointing,
    compilation_cache,
    flops,
    preflight,
    pretrained,
    run_config,
    train_input,
)
from training import run as run_lib
from training import state as state_lib
from training import workdir as workdir_lib
from training.actions import TrainingError
from training.metrics import (
    MetricsFileError,
    MetricsLogger,
    MetricsWriteError,
    check_metrics_file,
    evaluations,
    metrics_lost_warning,
)

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for checkpoints and metrics.")
_ALLOW_CONFIG_CHANGE = flags.DEFINE_bool(
    "allow_config_change", False, "Resume although model/optimizer/data fields differ from "
    "config.json, or adopt this config when config.json is missing or unreadable.")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "host:port of process 0 for jax.distributed (or "
    "$JAX_COORDINATOR_ADDRESS); on Cloud TPU or SLURM pass --distributed instead.")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in the job.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index.")
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False, "Call jax.distributed.initialize() with auto-detection.")
_BUILD_DATA = flags.DEFINE_bool(
    "build_data", False, "Build what config.data names but the data directory lacks first "
    "(single process; else an error names the python -m tools.build_data command).")
_CHECK = flags.DEFINE_bool(
    "check", False,
    "Preflight: report every input the run needs (and --workdir's state when given) and "
    "whether the step fits the devices here, then exit (0: ready, 2: not); writes nothing.")
_DEVICES = flags.DEFINE_integer(
    "devices", None, "With --check: size the run for this many devices, simulated on this "
    "host's CPU (a login node needs no GPU, data or checkpoint for it).", lower_bound=1)
_DEVICE_MEMORY = flags.DEFINE_float(
    "device_memory", None, "With --check: GiB of memory of each device to size the run for "
    "(default: what the devices here report).", lower_bound=0.001)
_COMPILATION_CACHE = flags.DEFINE_string(
    "compilation_cache", None, "JAX's persistent compilation cache (a folder every host sees; "
    "default $JAX_COMPILATION_CACHE_DIR, else <workdir>/compilation_cache); 'none': off.")


def _say(line):
    """A console line, from process 0."""
    if jax.process_index() == 0:
        print(line, flush=True)


# ---------------------------------------------------------------- checks ----
def check_config(config):
    """Checks the fields that need nothing loaded and that config.mesh fits; returns the mesh."""
    evaluators_lib.check_run_config(config, config.checkpoint.best_metric)
    with errors.reraised(run_config.ConfigError, ValueError,
                         suffix=f" here ({jax.devices()[0].platform})"):
        mesh = state_lib.make_mesh(config.mesh)
    if config.batch_size % (mesh.shape["data"] * config.grad_accum_steps):
        raise run_config.ConfigError(
            f"config.batch_size={config.batch_size} must divide by data devices "
            f"({mesh.shape['data']}) x grad_accum_steps ({config.grad_accum_steps})")
    return mesh


def load_vocabulary(config, build_data):
    """The vocabulary, once the training data is known to be built (or built now)."""
    vocab = run_lib.vocabulary(config.vocab.path)
    run_config.check_vocab(config, vocab)
    with errors.reraised(TrainingError, (OSError, errors.Error), "config.data: "):
        pipeline.ensure_built(config.data, build=build_data and jax.process_count() == 1)
    return vocab


def check_workdir(config, workdir, allow_change):
    """Checks an earlier run's files; returns (last whole step of metrics.jsonl, changed fields)."""
    if os.path.isdir(run_config.path(workdir)):  # Written at the start, read at a resume.
        raise TrainingError(f"{run_config.path(workdir)} is a folder, not a file; move it away")
    with errors.reraised(TrainingError, (MetricsFileError, checkpointing.CheckpointError,
                                         run_config.ResumeRefused)):
        whole_through = check_metrics_file(workdir)
        if not checkpointing.steps(workdir):
            return whole_through, []
        changes, warning_lines = run_config.check_resume(config, workdir, allow_change)
    for line in [*warning_lines, *metrics_lost_warning(workdir)]:
        _say(line)
    return whole_through, changes


def build_evaluators(config, model, vocab, names=None):
    """The evaluators of `names` (default: the in-loop ones, `every` > 0), their data read now."""
    setup = caption_evaluator.Setup(model, vocab, config.data, config.model.image_size)
    names = [name for name, c in config.evals.items() if c.every] if names is None else names
    return evaluators_lib.build(config.evals, setup, names=names)


# ----------------------------------------------------------- state, step ----
def restore_or_initialize(run, tx, abstract_state, rng, whole_through, changes, weights=None):
    """(state, step) of the newest readable checkpoint, or of a fresh initialization (from the
    pretrained `weights` read, if given)."""
    config, workdir = run.config, run.workdir
    try:
        state, step = run.restore(abstract=abstract_state, set_aside=True, at_most=whole_through)
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
        state = state_lib.init_state(run.model, tx, rng, shardings)
    _say(f"Initialized the parameters in {compiled}")
    with errors.reraised(TrainingError, (FileNotFoundError, ValueError)):
        state["params"] = pretrained.initialize(state["params"], config.init, abstract_state,
                                                 weights)
    return state, 0


@functools.lru_cache(maxsize=4)
def jitted_train_step(model, mesh, step_config):
    """The train step jitted with the state's and batch's shardings (cached per
    run_config.STEP_FIELDS)."""
    tx, schedule = state_lib.create_optimizer(step_config)
    _, shardings = state_lib.state_shardings(model, tx, mesh, state_lib.axis_rules(step_config))
    return jax.jit(state_lib.make_train_step(model, tx, schedule, step_config),
                   in_shardings=(shardings, NamedSharding(mesh, P("data")), None),
                   out_shardings=(shardings, None), donate_argnums=0)


def lower_train_step(config, model, mesh, abstract_state, rng, layout=None):
    """The train step lowered for the state's and global batch's shapes, in the mesh and rules."""
    step_config = ml_collections.FrozenConfigDict({k: config[k] for k in run_config.STEP_FIELDS})
    batch = train_input.abstract_batch(config, NamedSharding(mesh, P("data")), layout)
    with jax.set_mesh(mesh), nn.logical_axis_rules(state_lib.axis_rules(config)):
        return jitted_train_step(model, mesh, step_config).lower(abstract_state, batch, rng)


def compile_train_step(config, model, mesh, abstract_state, rng, cleanup, layout=None):
    """Starts compiling the train step in a thread (overlapping a fresh run's other compile);
    returns the Future of (the compiled step, its compilation_cache.watch report). An error
    meanwhile waits for the compile to end (`cleanup`, an ExitStack): an interpreter that exits
    under a running compile aborts."""
    outcome = concurrent.futures.Future()

    def compile_step():
        try:
            with compilation_cache.watch() as compiled:
                step = lower_train_step(config, model, mesh, abstract_state, rng,
                                        layout).compile()
            outcome.set_result((step, compiled))
        except BaseException as e:  # noqa: BLE001  Raised in the caller's thread by result().
            outcome.set_exception(e)

    # A daemon: a run stopped meanwhile by Ctrl-C does not wait.
    thread = threading.Thread(target=compile_step, name="compile_train_step", daemon=True)
    thread.start()
    cleanup.push(lambda kind, *_: None if kind is None or issubclass(kind, KeyboardInterrupt)
                 else thread.join())
    return outcome


def open_outputs(config, workdir, start_step):
    """The metrics logger (repaired to `start_step`), config.json written, the savers."""
    with errors.reraised(TrainingError, (MetricsFileError, MetricsWriteError)):
        logger = MetricsLogger(workdir, config.total_steps, start_step,
                               sync_every=config.checkpoint.every, log_every=config.log_every)
    if jax.process_index() == 0:
        run_config.save(workdir, config)
    saver = checkpointing.Saver(checkpointing.manager(workdir, keep=config.checkpoint.keep))
    checkpointing.set_aside_damaged_best(workdir)  # Else orbax's manager fails to open.
    best_saver = checkpointing.Saver(
        checkpointing.best_manager(workdir, config.checkpoint.best_metric))
    return logger, saver, best_saver


# ------------------------------------------------------------------ main ----
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, allow_change=False,
                       compilation_cache_dir=None, build_data=False):
    """Trains (or resumes) the run in `workdir`; returns the final state.
    Raises run_config.ConfigError (nothing written) or TrainingError."""
    while True:
        try:
            with contextlib.ExitStack() as cleanup:  # Run backwards when the call ends.
                if preemption.install():
                    cleanup.callback(preemption.uninstall)
                cleanup.callback(workdir_lib.release, workdir)  # A no-op unless locked.
                return _train_and_evaluate(config, workdir, allow_change,
                                           compilation_cache_dir, build_data, cleanup)
        except actions.RestoredNotFinite as e:  # Damaged data in the checkpoint: the one before.
            with errors.reraised(TrainingError, checkpointing.CheckpointError):
                checkpointing.set_aside_to_resume_before(workdir, e.restored_step, str(e))
        except checkpointing.SaveError as e:  # Says what the folders hold once saves ended.
            raise e.now() from None


def _train_and_evaluate(config, workdir, allow_change, compilation_cache_dir, build_data,
                        cleanup):
    """`train_and_evaluate`; `cleanup` (an ExitStack) closes what it opens."""
    # Checks: everything the user gave is read before anything is written in the workdir.
    mesh = check_config(config)
    vocab = load_vocabulary(config, build_data)
    whole_through, changes = check_workdir(config, workdir, allow_change)
    run = run_lib.Run(workdir, config, vocab)
    model = run.model
    tx, _ = state_lib.create_optimizer(config)
    abstract_state, _ = state_lib.state_shardings(model, tx, mesh, state_lib.axis_rules(config))
    resuming = bool(checkpointing.steps(workdir))
    with errors.reraised(TrainingError, (FileNotFoundError, ValueError)):
        evaluators = build_evaluators(config, model, vocab)
        weights = None if resuming else pretrained.read(config.init, abstract_state["params"])
    with errors.reraised(TrainingError, workdir_lib.WorkdirError):  # Created, writable, locked.
        workdir_lib.prepare(workdir, jax.process_index())
        note = workdir_lib.lock(workdir) if jax.process_index() == 0 else None
    if note:
        _say(note)
    compilation_cache.enable_from_flag(compilation_cache_dir, workdir)

    layout = train_input.packing_layout(config, model, mesh, functools.partial(
        pipeline.sample_lengths, config.data, vocab, config.seed))
    if layout is not None:
        _say(f"Packing {config.batch_size} examples a step into {layout.rows} rows "
             f"(config.data.pack)")

    # State: the workdir's newest readable checkpoint, or a fresh initialization.
    init_rng, train_rng = jax.random.split(jax.random.key(config.seed))
    # A fresh run compiles its step while the state initializes; a resumed one after the
    # restore (a checkpoint may be unreadable, and an exit then should not leave a thread).
    compile_step = functools.partial(compile_train_step, config, model, mesh, abstract_state,
                                     train_rng, cleanup, layout)
    compiling = None if resuming else compile_step()
    state, start_step = restore_or_initialize(run, tx, abstract_state, init_rng, whole_through,
                                              changes, weights)
    # The input, from the step the state is at (the one place the start step is decided).
    batches = train_input.Batches(config, vocab, NamedSharding(mesh, P("data")), start_step,
                                  layout)
    cleanup.callback(batches.close)
    train_step = None
    if start_step < config.total_steps:
        train_step, compiled = (compiling or compile_step()).result()
        _say(f"Compiled the train step in {compiled}")
        batches.peek()  # Bad data stops the run here, before any evaluation.

    # Outputs and the loop's actions. Pending checkpoint writes finish even after an error.
    logger, saver, best_saver = open_outputs(config, workdir, start_step)
    cleanup.callback(logger.close)
    cleanup.callback(checkpointing.wait_all, saver, best_saver)
    save_best_again(config, workdir, state, start_step, best_saver, abstract_state)
    step_flops = flops.train_step_flops(
        model.config, config.batch_size,
        layout.prompt_len if layout else config.data.max_prompt_len,
        config.data.max_target_len, rows=layout and layout.rows)
    checkpoint = actions.Checkpoint(saver, config, start_step)
    log = actions.Log(logger, config, start_step, step_flops, checkpoint, model.config)
    evaluate = actions.Evaluate(evaluators, logger, best_saver, config)

    preemption.reinstall()  # Libraries set up above may have taken the signals.
    if start_step == 0:
        evaluate(0, state)
    if train_step is not None:
        logger.log(start_step + 1, {"perf/compile_s": compiled.seconds})
        log.restart_clock(start_step)
    return train_loop(state, start_step, config.total_steps, train_step, batches, train_rng,
                      (log, evaluate, checkpoint, (saver, best_saver)))


def save_best_again(config, workdir, state, step, best_saver, abstract_state):
    """Saves the best checkpoint of metrics.jsonl's best evaluation (up to the restored `step`)
    again when checkpoints_best/ lacks it: its save failed, or was cut short, after its step's
    regular checkpoint was saved (the state read from that checkpoint)."""
    metric = config.checkpoint.best_metric
    # Records up to `step` only: every process decides alike, before or after the repair.
    scores = {s: v for s, v in evaluations(workdir, metric).items() if s <= step}
    if not scores:
        return
    best_step = max(sorted(scores, reverse=True), key=lambda s: scores[s][metric])  # As orbax.
    value = scores[best_step][metric]
    if any(s > step or scores.get(s, {}).get(metric, -float("inf")) >= value
           for s in checkpointing.steps(workdir, best=True)):  # Newer: evaluated again.
        return
    if best_step != step:
        if best_step not in checkpointing.steps(workdir):
            _say(f"warning: the best checkpoint of step {best_step} ({metric}={value}) "
                 f"was not saved, and no checkpoint of that step is kept to save it again")
            return
        state, _ = checkpointing.restore(workdir, abstract_state, step=best_step)
    _say(f"Saving the best checkpoint of step {best_step} ({metric}={value}) again: "
         f"{checkpointing.checkpoint_dir(workdir, best=True)} lacks it")
    best_saver.save(best_step, state, metrics=scores[best_step])


def train_loop(state, start_step, total_steps, train_step, batches, rng, periodic):
    """Trains up to `total_steps` with the `periodic` actions after each step (and the savers a
    stop waits for); returns the state."""
    log, evaluate, checkpoint, savers = periodic
    measurements = None
    for step in range(start_step + 1, total_steps + 1):
        try:
            batch = batches.next(step)
        except TrainingError as e:  # Bad data: every completed step is kept.
            log.flush()
            raise checkpoint.before_error(step - 1, state, measurements, e) from None
        with jax.transfer_guard_device_to_host("disallow"):  # Nothing here waits for it.
            state, measurements = train_step(state, batch, jax.random.fold_in(rng, step))
        if step == start_step + 1 and start_step:  # Damaged data in the checkpoint shows here.
            actions.check_restored(start_step, measurements)
        preemption.started_training()  # From here on a signal saves a step.
        log(step, measurements)
        checkpoint.poll()  # A failed background save stops the run now, not at the next.
        evaluate.poll()
        stopping = preemption.should_stop()  # With several processes: any of them.
        evaluating, saving = evaluate.due(step), stopping or checkpoint.due(step)
        if evaluating or saving:
            log.flush()  # They wait for the step anyway.
        if evaluating:
            evaluate(step, state)
            log.restart_clock(step)
        if saving:
            checkpoint(step, state, measurements)
        if stopping:
            actions.stop(step, *savers)
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
    """absl's flag parsing; bad flags or a stray argument are one `error:` line (exit 2)."""
    try:
        rest = run_config.parse_flags(flags.FLAGS, argv)
    except run_config.ConfigError as e:
        errors.fail(e)
    if len(rest) > 1:
        errors.fail(f"unexpected argument {rest[1]!r}: train.py takes only flags "
                    f"(--name=value; see --help)")
    return rest


def preflight_check(config, say=_say, devices=None, device_memory_gib=None, workdir=None,
                    allow_change=False):
    """`--check`: True when the run can start here and its step fits the devices (or
    `devices` devices of `device_memory_gib` GiB each), in `workdir` if given."""
    workdir_item = None
    if workdir is not None:  # Why the trainer would refuse it, found without writing there.
        try:
            workdir_lib.check_usable(workdir)
            check_workdir(config, workdir, allow_change)
            workdir_item = preflight.Item(f"workdir {workdir}")
        except errors.Error as e:
            workdir_item = preflight.Item(f"workdir {workdir}", str(e))
    return preflight.check(config, build_evaluators=build_evaluators,
                           lower_step=lower_train_step, say=say, devices=devices,
                           device_memory_gib=device_memory_gib, workdir_item=workdir_item)


def main(argv):
    del argv  # parse_flags refused any positional argument.
    if _WORKDIR.value is None and not _CHECK.value:
        errors.fail("--workdir is required")
    if not flags.FLAGS["verbosity"].present:  # The libraries' logs and warnings off.
        errors.quiet_native_logs()
        logging.set_verbosity(logging.ERROR)
        warnings.simplefilter("ignore")
    if not _CHECK.value and (_DEVICES.value or _DEVICE_MEMORY.value):
        errors.fail("--devices and --device_memory size a run for --check only")
    try:
        if _CHECK.value:
            ready = preflight_check(_CONFIG.value, devices=_DEVICES.value,
                                    device_memory_gib=_DEVICE_MEMORY.value,
                                    workdir=_WORKDIR.value,
                                    allow_change=_ALLOW_CONFIG_CHANGE.value)
            sys.exit(0 if ready else 2)
        logging.info("Config:\n%s", json.dumps(_CONFIG.value.to_dict(), indent=2, default=str))
        initialize_distributed()
        train_and_evaluate(_CONFIG.value, _WORKDIR.value, _ALLOW_CONFIG_CHANGE.value,
                           _COMPILATION_CACHE.value, build_data=_BUILD_DATA.value)
    except errors.Error as e:  # Bad config or data, a full disk, ...: one line.
        errors.fail(e)
    preemption.finished()  # Done and saved: a late Ctrl-C exits 0, not 130.


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    app.run(main, flags_parser=parse_flags)
