"""`train.py --check`: whether a config can start here, said before a job is launched.

Reads every input the run needs and reports each missing one with its fix; then compiles the
training step and reports its memory against the devices' capacity, with the smallest
setting that fits when it does not. Nothing is written. `--devices N --device_memory GIB` size
the run for other devices than these (a login node's CPU): the step is compiled for N simulated
CPU devices from abstract shapes, without the data, vocabulary or checkpoints.
"""

import contextlib
import dataclasses
import os

import jax
import ml_collections
import numpy as np

import errors
from data import pipeline
from data.pipeline import packing
from model import captioner, t5, upstream
from model.upstream import big_vision, files, hugging_face
from training import flops, pretrained, run_config
from training import run as run_lib
from training import state as state_lib

GIB = 2**30
# XLA's CPU analysis of the step overestimates a GPU's peak: the H100 peaks of docs/training.md
# were 0.51 to 0.67 of it (BB batch 256 with each remat setting, Bg and Lg at 256 per micro-
# batch). A GPU's memory is estimated as the analysis times the largest ratio, rounded up.
GPU_PEAK_PER_CPU_ANALYSIS = 0.7


@dataclasses.dataclass
class Item:
    """One input of the run: what it is, and why it is not usable (None when it is)."""
    what: str
    problem: str | None = None

    def line(self):
        return f"  MISSING  {self.what}: {self.problem}" if self.problem else \
            f"  ok       {self.what}"


def _vocabulary(config):
    """(Item, vocabulary or None)."""
    path = config.vocab.path
    try:
        vocab = run_lib.vocabulary(path)
        run_config.check_vocab(config, vocab)
    except (OSError, ValueError, errors.Error) as e:
        return Item(f"vocabulary {path}", str(e)), None
    return Item(f"vocabulary {path} ({vocab.vocab_size} pieces)"), vocab


def _training_data(config):
    data = config.data
    try:
        pipeline.ensure_built(data)
    except (OSError, errors.Error, ValueError) as e:
        return Item(f"training data {data.dataset} ({len(data.langs)} languages)", str(e))
    return Item(f"training data {data.dataset}, built for its {len(data.langs)} languages")


def _unreadable(path, field):
    """Why `path` (config.<field>) cannot be read, and the override that fixes it."""
    if "://" in path and not path.startswith("file://"):
        return (f"{path} is remote and cannot be read here (no network, or no access); copy "
                f"it to this machine and pass --config.{field}=<the local copy> (docs/files.md)")
    return f"{path} not found; pass --config.{field}=<its path>"


_G14_NOT_PUBLIC = ("; the paper's ViT-g/14 (trained on JFT-3B) is not public: name a big_vision "
                   "`.npz` of a g/14 of your own (docs/files.md)")


def _exists(path):
    """Whether a pretrained checkpoint's folder or `.npz` (local or remote) is there."""
    path = hugging_face.local_path(path)
    try:
        return files.isdir(path) or files.isfile(big_vision.split_subkey(path)[0])
    except Exception:  # noqa: BLE001  TensorFlow's errors for an unreachable gs:// path.
        return False


def _pretrained(config, abstract_params):
    """An Item per `config.init` field that names something, matched against `abstract_params`."""
    items = []
    for field in ("mt5", "vit"):
        path = config.init.get(field)
        if not path:
            continue
        what = f"pretrained config.init.{field}"
        if not _exists(path):
            items.append(Item(what, _unreadable(path, f"init.{field}") + (
                _G14_NOT_PUBLIC if field == "vit" and config.model.vit.variant == "g/14" else "")))
        elif abstract_params is None:
            items.append(Item(f"{what} {path} (shapes not checked: they need the vocabulary)"))
        else:
            try:
                _, (report,) = upstream.load_pretrained(
                    abstract_params, ml_collections.ConfigDict({field: path}), check_only=True)
            except (OSError, ValueError) as e:
                items.append(Item(what, str(e)))
            else:
                items.append(Item(f"{what} {report.source}: its shapes fit the model"))
    path = config.init.get("checkpoint")
    if path:
        try:
            pretrained.check_other_run(path, abstract_params)
        except FileNotFoundError:
            problem = _unreadable(path, "init.checkpoint")
        except (OSError, ValueError) as e:
            problem = str(e)
        else:
            problem = None
        items.append(Item(f"pretrained config.init.checkpoint {path}", problem))
    return items


def _evaluation_data(config, model, vocab, build_evaluators):
    items = []
    for name, eval_config in config.evals.items():
        if not eval_config.every:
            continue
        what = f"evaluation data of config.evals.{name}"
        if vocab is None:  # Where the files are; their contents are read with the vocabulary.
            absent = [k for k in ("data_dir", "manual_dir")
                      if eval_config.get(k) and not os.path.isdir(eval_config[k])]
            items.append(Item(what, "; ".join(
                f"{eval_config[k]} not found; pass --config.evals.{name}.{k}=<its path>"
                for k in absent) or None))
            continue
        try:
            build_evaluators(config, model, vocab, names=[name])
        except (OSError, ValueError, errors.Error) as e:
            items.append(Item(what, str(e).removeprefix(f"config.evals.{name}: ")))
        else:
            items.append(Item(what))
    return items


def simulate_devices(count):
    """Makes JAX in this process see `count` CPU devices (`--check --devices`); before its
    first computation, or with that many CPU devices already."""
    with contextlib.suppress(RuntimeError):  # JAX has started: fine if it has those devices.
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", count)
    if jax.devices()[0].platform != "cpu" or jax.device_count() != count:
        raise errors.InputError(f"--devices={count}: this process already uses "
                                f"{jax.device_count()} {jax.devices()[0].platform} device(s)")


def device_capacity():
    """Bytes of memory of one device, or None where the backend does not say (a CPU)."""
    return (jax.devices()[0].memory_stats() or {}).get("bytes_limit")


def packing_layout(config, model, mesh, lengths):
    return packing.layout(config, data_devices=mesh.shape["data"],
                          image_tokens=model.num_image_tokens, lengths=lengths)


def packing_lines(config, model, mesh, lengths, source):
    """The estimate of the step's work: real / computed positions, FLOPs computed and useful."""
    data, batch, n = config.data, config.batch_size, model.num_image_tokens
    layout = packing_layout(config, model, mesh, lengths)
    rows, prompt_len = (layout.rows, layout.prompt_len) if layout else (batch, data.max_prompt_len)
    prompt_lens, caption_lens = (np.asarray(x) for x in lengths(packing.SAMPLE))
    enc, dec = (np.mean(lens) * batch / (rows * cap) for lens, cap in (
        (n + prompt_lens, n + prompt_len), (caption_lens, data.max_target_len)))
    useful = flops.useful_step_flops(
        model.config, packing.SAMPLE, flops.length_sums(n + prompt_lens, caption_lens))
    computed = flops.train_step_flops(model.config, batch, prompt_len, data.max_target_len, rows)
    return [f"  packing  {'on' if layout else 'off'} (config.data.pack): {batch} examples in "
            f"{rows} rows; real / computed positions: encoder {enc:.0%}, decoder {dec:.0%} "
            f"({source})",
            f"  FLOPs    {computed / batch / 1e9:.4g} GFLOP computed per training example, "
            f"{useful / packing.SAMPLE / 1e9:.4g} at the real lengths"]


def step_memory(config, model, mesh, compile_step, lengths=None):
    """Per-device bytes of the compiled training step, from XLA's memory analysis."""
    tx, _ = state_lib.create_optimizer(config)
    abstract_state, _ = state_lib.state_shardings(model, tx, mesh, state_lib.axis_rules(config))
    compiled = compile_step(config, model, mesh, abstract_state,
                            packing_layout(config, model, mesh, lengths))
    m = compiled.memory_analysis()
    return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            - m.alias_size_in_bytes + m.generated_code_size_in_bytes)


def replaced(config, **fields):
    """A copy of `config` with dotted `fields` replaced."""
    config = config.copy_and_resolve_references()
    with config.unlocked():
        config.update_from_flattened_dict(fields)
    return config


def _alternatives(config, data_devices):
    """Settings that use less memory, cheapest in speed first."""
    per_device, k = config.batch_size // data_devices, config.grad_accum_steps
    return [{"grad_accum_steps": accum, **remat}
            for remat in ([] if config.model.remat else [{}]) + [{"model.remat": True}]
            for accum in (k * 2**i for i in range(9))
            if per_device % accum == 0 and (accum != k or remat)]


def fit(config, model, mesh, compile_step, say, device_memory_gib=None, lengths=None):
    """Reports the step's memory against the devices' (or `device_memory_gib` each, for a
    GPU when compiled on a CPU); returns whether it fits."""
    data_devices = mesh.shape["data"]
    say(f"  batch    {config.batch_size} global = {data_devices} data device(s) x "
        f"{config.batch_size // data_devices} per device, in {config.grad_accum_steps} "
        f"micro-batch(es) of {config.batch_size // data_devices // config.grad_accum_steps}")
    device = jax.devices()[0]
    capacity = device_capacity() if device_memory_gib is None else device_memory_gib * GIB
    for_gpu = device.platform == "cpu" and device_memory_gib is not None

    def need(config):  # Bytes per device where the run goes.
        used = step_memory(config, model, mesh, compile_step, lengths)
        return used * GPU_PEAK_PER_CPU_ANALYSIS if for_gpu else used

    used = need(config)
    if capacity is None:
        say(f"  memory   {used / GIB:.2f} GiB per device (an estimate: XLA's analysis of the step "
            f"compiled for {device.platform}, which reports no device memory; "
            f"--device_memory GIB gives a verdict)")
        return True
    of = f"{capacity / GIB:.1f} GiB" + (" given" if device_memory_gib else
                                        f" ({device.device_kind})")
    how = (f" (XLA's CPU analysis x {GPU_PEAK_PER_CPU_ANALYSIS}: an H100's measured peaks were "
           f"at most 0.67 of it, docs/training.md)" if for_gpu else "")
    if used <= capacity:
        say(f"  fits     {used / GIB:.2f} GiB per device of {of}{how}")
        return True
    say(f"  does not fit: {used / GIB:.2f} GiB per device of {of}{how}")
    for fields in _alternatives(config, data_devices):
        flags = " ".join(f"--config.{k}={v}" for k, v in fields.items())
        smaller = need(replaced(config, **fields))
        say(f"           with {flags}: {smaller / GIB:.2f} GiB")
        if smaller <= capacity:
            say(f"  the smallest change that fits: {flags}")
            return False
    say("  nothing fits, even with remat and 256 times the accumulation: use more devices or "
        "--config.mesh.fsdp=True")
    return False


def check(config, *, build_evaluators, compile_step, say=print, devices=None,
          device_memory_gib=None, workdir_item=None):
    """Runs the preflight; returns True when the run can start here and fits. `devices` and
    `device_memory_gib` size it for those instead (the fit then needs none of the inputs);
    `workdir_item` is the run folder's Item, when one is given."""
    sizing = devices is not None or device_memory_gib is not None
    if devices is not None:
        simulate_devices(devices)
    try:
        mesh = state_lib.make_mesh(config.mesh)
        run_config.check(config)
    except (ValueError, errors.Error) as e:
        say(f"  MISSING  a valid config: {e}")
        return False
    vocab_item, vocab = _vocabulary(config)
    size = vocab.vocab_size if vocab is not None else config.model.t5.vocab_size
    model = captioner.from_config(config.model, size or 128)  # 128: any, for the names.
    abstract_params = state_lib.abstract_params(model) if size else None
    data_item = _training_data(config)
    items = [vocab_item, data_item, *_pretrained(config, abstract_params),
             *_evaluation_data(config, model, vocab, build_evaluators),
             *([workdir_item] if workdir_item else [])]
    target = (f" sized for {jax.device_count()} device(s) of " + (
        f"{device_memory_gib:g} GiB" if device_memory_gib else "the memory here")
        if sizing else "")
    say(f"Preflight of {jax.device_count()} {jax.devices()[0].platform} device(s){target}:")
    for item in items:
        say(item.line())
    if size is None:  # The vocabulary unread: mT5's, as every baseline's checkpoints.
        size = t5.MT5_VOCAB_SIZE
        say(f"  vocab    {size} ids assumed (mT5's; the vocabulary is not read here and "
            f"config.model.t5.vocab_size is unset)")
        model = captioner.from_config(config.model, size)
    lengths, source = ((lambda n: pipeline.sample_lengths(config.data, vocab, config.seed, n)),
                       "the first examples of the training stream")
    if vocab is None or data_item.problem:
        lengths, source = (lambda n: packing.synthetic_lengths(
            n, config.data.max_prompt_len, config.data.max_target_len)), packing.SYNTHETIC
    for line in packing_lines(config, model, mesh, lengths, source):
        say(line)
    missing = any(item.problem for item in items)
    if missing and not sizing:
        say("Not ready: fix the MISSING inputs above (the step's memory is checked once they "
            "are all there, or now with --devices N --device_memory GIB).")
        return False
    fits = fit(config, model, mesh, compile_step, say, device_memory_gib, lengths)
    if missing:
        say("Not ready: fix the MISSING inputs above.")
        return False
    say("Ready." if fits else "Not ready: the step does not fit the devices.")
    return fits
