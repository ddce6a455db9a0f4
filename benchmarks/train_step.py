"""Times the training step of a config: compile times, step time, throughput and MFU.

    python benchmarks/train_step.py --config configs/bb.py [--steps 5] \
        [--config.batch_size=32 --config.model.remat=True ...] [--memory_only]

The step is the one `train.py` runs (`train.make_train_step`: same model,
loss, Adafactor, shardings over all devices), fed with random inputs of the
config's shapes: images, prompts, and captions of random lengths around
--caption_len tokens padded to `data.max_target_len`. The data pipeline is
not measured (benchmarks/input_pipeline.py does that). It prints
- compile times of the state initializer and of the step, and whether JAX's
  persistent compilation cache served them (run the same command twice: the
  second run says "hit"), with the size of their StableHLO;
- XLA's memory analysis of the compiled step and, where the backend reports
  it, the device's peak memory;
- step time, examples/s, target tokens/s (real caption tokens and padded
  positions), model FLOPs per example (training/flops.py: counted from the
  config at the padded lengths; rematerialization and padding are reported
  apart), and MFU against the data-sheet bf16 peak (TPU, NVIDIA GPU) and
  against a square matmul in the model's dtype measured in the same run.

--memory_only compiles the step for abstract inputs (nothing allocated, not
run) and prints the memory analysis: the way to size a config that does not
fit this machine (e.g. Lg's per-device batch for one 80 GB GPU).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import train  # noqa: E402
from training import compilation_cache, flops, run_config  # noqa: E402
from training import state as state_lib  # noqa: E402

_STEPS = flags.DEFINE_integer("steps", 5, "Timed steps (after one warm-up step).")
_VOCAB_SIZE = flags.DEFINE_integer(
    "vocab_size", None, "Vocabulary size when config.model.t5.vocab_size is unset "
    "(default: mT5's 250112 if the config names a gs:// vocabulary, else 1024).")
_CAPTION_LEN = flags.DEFINE_integer(
    "caption_len", 16, "Mean caption length in tokens (EOS included); lengths are drawn "
    "uniformly from [caption_len / 2, 3 * caption_len / 2], capped at max_target_len.")
_MEMORY_ONLY = flags.DEFINE_bool(
    "memory_only", False, "Compile for abstract inputs and print the memory analysis; "
    "allocate and run nothing.")

GIB = 2**30


def caption_lengths(batch_size, caption_len, max_len, rng):
    """Random caption lengths around `caption_len`, within [1, max_len]."""
    low, high = max(1, caption_len // 2), max(1, (3 * caption_len) // 2)
    return np.minimum(rng.integers(low, high + 1, batch_size), max_len)


def random_batch(config, vocab_size, rng, caption_len=16):
    """Inputs of the config's shapes: images in [-1, 1], prompts, padded random captions."""
    b, size = config.batch_size, config.model.image_size
    max_len = config.data.max_target_len
    targets = rng.integers(2, vocab_size, (b, max_len)).astype(np.int32)
    lengths = caption_lengths(b, caption_len, max_len, rng)
    targets[np.arange(max_len)[None, :] >= lengths[:, None]] = 0  # Padding.
    return {
        "image": rng.uniform(-1, 1, (b, size, size, 3)).astype(np.float32),
        "prompt": rng.integers(2, vocab_size, (b, config.data.max_prompt_len)).astype(np.int32),
        "targets": targets,
    }


def abstract_batch(config, sharding):
    """The shapes and dtypes of `random_batch`, for compiling without data."""
    b, size = config.batch_size, config.model.image_size
    shapes = {"image": ((b, size, size, 3), jnp.float32),
              "prompt": ((b, config.data.max_prompt_len), jnp.int32),
              "targets": ((b, config.data.max_target_len), jnp.int32)}
    return {k: jax.ShapeDtypeStruct(s, d, sharding=sharding) for k, (s, d) in shapes.items()}


def matmul_flops_per_second(n=2048, dtype=jnp.float32, repeats=10):
    """FLOP/s of one n x n matmul in `dtype` on the default device (its practical peak)."""
    a = jnp.ones((n, n), dtype)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    start = time.perf_counter()
    for _ in range(repeats):
        out = f(a)
    out.block_until_ready()
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def compile_timed(jitted, *args):
    """(compiled, "lower ... s + compile ... s (cache ...)", StableHLO lines) of `jitted`.

    Tracing and lowering to StableHLO run every time; the persistent cache
    saves the XLA compilation only.
    """
    start = time.perf_counter()
    lowered = jitted.lower(*args)
    lower_seconds = time.perf_counter() - start
    with compilation_cache.watch() as report:
        compiled = lowered.compile()
    return (compiled, f"lower {lower_seconds:.1f} s + compile {report}",
            len(lowered.as_text().splitlines()))


def memory_lines(compiled):
    """XLA's memory analysis of a compiled program, in GiB, as printed lines."""
    m = compiled.memory_analysis()
    if m is None:
        return ["memory:        (no analysis on this backend)"]
    args, out = m.argument_size_in_bytes / GIB, m.output_size_in_bytes / GIB
    alias, temp = m.alias_size_in_bytes / GIB, m.temp_size_in_bytes / GIB
    return [f"memory:        {args + out - alias + temp:.2f} GiB per device by XLA's analysis "
            f"(arguments {args:.2f}, outputs {out:.2f}, of which donated {alias:.2f}, "
            f"temporaries {temp:.2f})"]


def flop_lines(model_config, config, lengths, step_seconds, peaks):
    """Model FLOPs per example, what remat and padding add, and MFU lines."""
    prompt_len, max_len = config.data.max_prompt_len, config.data.max_target_len
    per_example = flops.train_flops_per_example(model_config, prompt_len, max_len)
    parts = flops.forward_flops(model_config, prompt_len, max_len)
    vit = parts["vit_stem"] + parts["vit_blocks"] + parts["vit_head"]
    lines = [f"model FLOPs:   {per_example / 1e9:.4g} GFLOP per training example at "
             f"{max_len} target positions (3x forward {sum(parts.values()) / 1e9:.4g}: ViT "
             f"{vit / 1e9:.4g}, mT5 encoder {parts['t5_encoder'] / 1e9:.4g}, decoder "
             f"{parts['t5_decoder'] / 1e9:.4g}, logits {parts['t5_logits'] / 1e9:.4g})"]
    real = np.mean([flops.train_flops_per_example(model_config, prompt_len, int(n))
                    for n in lengths])
    lines.append(f"padding:       at the real caption lengths it would be {real / 1e9:.4g} "
                 f"GFLOP: {1 - real / per_example:.0%} of the model FLOPs are spent on "
                 f"padding positions (data.max_target_len={max_len}; python -m "
                 f"training.target_length fits it to the data)")
    remat = flops.remat_flops_per_example(model_config, prompt_len, max_len)
    if remat:
        lines.append(f"remat:         recomputes {remat / 1e9:.4g} GFLOP per example in the "
                     f"backward pass: the hardware does {1 + remat / per_example:.2f}x the "
                     f"model FLOPs (not counted in MFU)")
    if step_seconds:
        achieved = config.batch_size * per_example / step_seconds
        lines.append(f"achieved:      {achieved / 1e12:.3f} TFLOP/s of model FLOPs over "
                     f"{jax.device_count()} device(s)")
        for name, peak in peaks:
            lines.append(f"MFU:           {achieved / (peak * jax.device_count()):.1%} of "
                         f"{peak / 1e12:.3g} TFLOP/s per device ({name})")
    return lines


def _build(config, vocab_size):
    """(mesh, rules, model, tx, schedule) of the config; ValueError names a bad field."""
    for name, value in (("--steps", _STEPS.value), ("--caption_len", _CAPTION_LEN.value),
                        ("--vocab_size", vocab_size)):
        if value < 1:
            raise ValueError(f"{name}={value} must be at least 1")
    run_config.check(config)
    mesh = state_lib.make_mesh(config.mesh)
    if config.batch_size % mesh.shape["data"]:
        raise ValueError(f"--config.batch_size={config.batch_size} does not divide over the "
                         f"{mesh.shape['data']} devices of the data axis")
    model = state_lib.create_model(config, vocab_size)
    tx, schedule = state_lib.create_optimizer(config)
    return mesh, state_lib.axis_rules(config), model, tx, schedule


def main(argv):
    del argv
    config = train._CONFIG.value  # noqa: SLF001  (the trainer's --config flag)
    vocab_size = config.model.t5.get("vocab_size") or _VOCAB_SIZE.value or (
        250112 if config.vocab.path.startswith("gs://") else 1024)
    try:
        mesh, rules, model, tx, schedule = _build(config, vocab_size)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    compilation_cache.enable_from_flag(train._COMPILATION_CACHE.value)  # noqa: SLF001  The trainer's flag.
    abstract, shardings = state_lib.state_shardings(model, tx, mesh, rules)
    batch_sharding = NamedSharding(mesh, P("data"))
    device = jax.devices()[0]
    cfg = model.config
    print(f"device: {jax.device_count()} x {device.device_kind}; config: batch "
          f"{config.batch_size}, image {cfg.image_size}, dtype {config.model.dtype}, "
          f"scan {cfg.t5.scan}, remat {cfg.t5.remat}, mesh {dict(mesh.shape)}, fsdp "
          f"{config.mesh.fsdp}, targets padded to {config.data.max_target_len}", flush=True)
    print(f"parameters:    {sum(x.size for x in jax.tree.leaves(abstract['params'])) / 1e6:.1f}M")

    init_fn = state_lib.init_state_fn(model, tx, shardings)
    compiled_init, init_report, init_lines = compile_timed(init_fn, jax.random.key(0))
    print(f"compile init:  {init_report}; StableHLO {init_lines} lines", flush=True)
    step_fn = jax.jit(train.make_train_step(model, tx, schedule, config),
                      in_shardings=(shardings, batch_sharding, None),
                      out_shardings=(shardings, None), donate_argnums=0)
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        compiled, step_report, step_lines = compile_timed(
            step_fn, abstract, abstract_batch(config, batch_sharding), jax.random.key(1))
    print(f"compile step:  {step_report}; StableHLO {step_lines} lines", flush=True)
    print("\n".join(memory_lines(compiled)))
    xla_flops = flops.compiled_flops(compiled)
    if xla_flops:
        print(f"XLA's count:   {xla_flops / 1e9:.1f} GFLOP per step (its cost analysis: counts "
              f"a scanned layer stack once and, on GPUs, misses library-call dots)")
    rng = np.random.default_rng(0)
    batch = random_batch(config, vocab_size, rng, _CAPTION_LEN.value)
    lengths = (batch["targets"] > 0).sum(axis=1)
    if _MEMORY_ONLY.value:
        print("\n".join(flop_lines(cfg, config, lengths, None, [])))
        return

    state = compiled_init(jax.random.key(0))
    batch = jax.device_put(batch, batch_sharding)
    state, m = compiled(state, batch, jax.random.key(1))  # Warm-up.
    jax.block_until_ready(m)
    start = time.perf_counter()
    for i in range(_STEPS.value):
        state, m = compiled(state, batch, jax.random.key(i))
    jax.block_until_ready(m)
    seconds = (time.perf_counter() - start) / _STEPS.value

    stats = device.memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        print(f"peak memory:   {stats['peak_bytes_in_use'] / GIB:.2f} GiB on device 0 "
              f"(reported by the backend)")
    real_tokens = int(lengths.sum())
    padded_tokens = config.batch_size * config.data.max_target_len
    print(f"step time:     {seconds * 1e3:.1f} ms (mean of {_STEPS.value} after a warm-up)")
    print(f"examples/s:    {config.batch_size / seconds:.2f}")
    print(f"target tok/s:  real {real_tokens / seconds:.0f} (captions of "
          f"{real_tokens / config.batch_size:.1f} tokens on average), padded "
          f"{padded_tokens / seconds:.0f} ({config.data.max_target_len} positions per example)")
    dtype = jnp.bfloat16 if config.model.dtype == "bfloat16" else jnp.float32
    peaks = []
    if flops.peak_flops(device):
        peaks.append(("data-sheet dense bf16 peak", flops.peak_flops(device)))
    n = 4096 if device.platform in ("gpu", "tpu") else 2048
    peaks.append((f"a {n}x{n} {jnp.dtype(dtype).name} matmul measured in this run",
                  matmul_flops_per_second(n, dtype)))
    print("\n".join(flop_lines(cfg, config, lengths, seconds, peaks)))


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    # train.py's parser: a misspelled --config.<field> is one `error:` line, status 2.
    app.run(main, flags_parser=train.parse_flags)
