"""`train.py --check`: whether a config can start here, said before a job is launched.

Reads every input the run needs and reports each missing one with its fix; then compiles the
training step and reports its memory against the devices' capacity, with the smallest
setting that fits when it does not. Nothing is written. `--devices N --device_memory GIB` size
the run for N GPUs from a login node's CPU: the step's values are counted from abstract shapes
for N simulated CPU devices (`gpu_step_memory`, nothing compiled), without the data,
vocabulary or checkpoints.
"""

import contextlib
import dataclasses
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax.sharding import Mesh

import errors
from data import pipeline
from data.pipeline import packing
from model import captioner, layers, t5, upstream
from model.upstream import big_vision, files, hugging_face
from training import flops, losses, pretrained, run_config, train_input
from training import run as run_lib
from training import state as state_lib
from training.train_input import packing_layout

GIB = 2**30


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
        problem = None
        try:
            pretrained.check_other_run(path, abstract_params)
        except FileNotFoundError:
            problem = _unreadable(path, "init.checkpoint")
        except (OSError, ValueError) as e:
            problem = str(e)
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


def step_memory(config, model, mesh, lower_step, lengths=None):
    """Per-device bytes of the training step compiled (`lower_step`: train.lower_train_step),
    from XLA's memory analysis."""
    tx, _ = state_lib.create_optimizer(config)
    abstract_state, _ = state_lib.state_shardings(model, tx, mesh, state_lib.axis_rules(config))
    m = lower_step(config, model, mesh, abstract_state, jax.random.key(0),
                   packing_layout(config, model, mesh, lengths)).compile().memory_analysis()
    return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            - m.alias_size_in_bytes + m.generated_code_size_in_bytes)


def _bytes(tree):
    """Bytes of the arrays of `tree` (ShapeDtypeStructs): of one device's shards of those with a
    sharding."""
    return sum(int(np.prod(x.sharding.shard_shape(x.shape) if x.sharding else x.shape))
               * x.dtype.itemsize for x in jax.tree.leaves(tree))


def saved_bytes(f, *args):
    """Bytes of the values that the forward pass of `f(*args)` keeps for its backward pass,
    in their own dtypes, its arguments aside (what jax.ad_checkpoint.print_saved_residuals
    lists)."""
    closed, shapes = jax.make_jaxpr(lambda *a: jax.vjp(f, *a), return_shape=True)(*args)
    outvars, args = closed.jaxpr.outvars, set(closed.jaxpr.invars)
    kept = {v for v in outvars[len(outvars) - len(jax.tree.leaves(shapes[1])):]
            if isinstance(v, jax.extend.core.Var) and v not in args}  # Not constants.
    return sum(v.aval.size * v.aval.dtype.itemsize for v in kept)


def gpu_step_memory(config, model, mesh, lengths=None):
    """Per-device bytes of the train step on a GPU, counted on a CPU without compiling it.

    XLA's CPU analysis cannot say it: the CPU backend computes bf16 in float32 and keeps
    float32 copies, materializes the attention scores that cuDNN's fused kernel never holds, and
    orders the step otherwise (packed and padded BB at batch 256 with remat "full", 6.0 and 8.1
    GiB on an H200, are 12.6 and 12.5 GiB there). A GPU peaks where the step holds the most: at
    the end of the forward pass (every value kept for the backward pass, and the float32 logits
    of one chunk of the fused loss with their gradient) or, the text tower differentiated,
    before the image tower's backward pass (every gradient, and the image tower's kept values);
    plus the state, the batch and, with accumulation, the summed gradients. Within 10% of every
    H200 peak of docs/training.md. Each device runs the whole model on its share of the batch
    (config.mesh.model > 1 splits it further: this errs high; FSDP's gathers are not counted).
    """
    rules = state_lib.axis_rules(config)
    tx, _ = state_lib.create_optimizer(config)
    state, _ = state_lib.state_shardings(model, tx, mesh, rules)
    batch = train_input.abstract_batch(config, layout=packing_layout(config, model, mesh, lengths))
    share = mesh.shape["data"] * config.grad_accum_steps  # One device's micro-batch.
    micro = {name: jax.ShapeDtypeStruct((x.shape[0] // share, *x.shape[1:]), x.dtype)
             for name, x in batch.items()}
    params, rng = state["params"], jax.random.key(0)

    def loss(params, batch):
        return losses.captioner_loss(model, params, batch, rng, label_smoothing=
                                     config.label_smoothing, z_loss=config.z_loss)[0]

    def image(params, images):
        return model.apply({"params": params}, images, train=True, rngs={"dropout": rng},
                           method="image_embeddings")

    one_device = Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1), mesh.axis_names)
    with jax.set_mesh(one_device), nn.logical_axis_rules(rules), layers.cudnn_stand_in():
        saved, image_saved = saved_bytes(loss, params, micro), saved_bytes(
            image, params, micro["image"])
    t5_config = model.config.t5
    logits = (micro["targets"].shape[0] * losses.CHUNK_LEN * t5_config.vocab_size
              * (4 + jnp.dtype(t5_config.dtype).itemsize))
    grads = _bytes(params)  # float32, as the parameters.
    summed = grads if config.grad_accum_steps > 1 else 0
    return (_bytes(state) + _bytes(batch) // mesh.shape["data"] + summed
            + max(saved + logits, grads + image_saved))


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


def fit(config, model, mesh, lower_step, say, device_memory_gib=None, lengths=None):
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
        return (gpu_step_memory(config, model, mesh, lengths) if for_gpu
                else step_memory(config, model, mesh, lower_step, lengths))

    used = need(config)
    if capacity is None:
        say(f"  memory   {used / GIB:.2f} GiB per device (an estimate: XLA's analysis of the step "
            f"compiled for {device.platform}, which reports no device memory; "
            f"--device_memory GIB gives a verdict)")
        return True
    of = f"{capacity / GIB:.1f} GiB" + (" given" if device_memory_gib else
                                        f" ({device.device_kind})")
    how = (" (a GPU's, counted from the step's values: docs/baselines.md)" if for_gpu
           else "")
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


def check(config, *, build_evaluators, lower_step, say=print, devices=None,
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
    fits = fit(config, model, mesh, lower_step, say, device_memory_gib, lengths)
    if missing:
        say("Not ready: fix the MISSING inputs above.")
        return False
    say("Ready." if fits else "Not ready: the step does not fit the devices.")
    return fits
