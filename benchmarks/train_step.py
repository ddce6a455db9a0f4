"""Times the training step of a config: step time, examples/s, tokens/s and MFU.

    python benchmarks/train_step.py --config configs/demo.py [--steps 20] \
        [--config.batch_size=32 --config.model.dtype=bfloat16 ...]

The step is the one `train.py` runs (same model, Adafactor, shardings over all
devices), fed with random inputs of the config's shapes, so the data pipeline
is not measured (benchmarks/input_pipeline.py does that). FLOPs per step come
from XLA's cost analysis of the compiled step. MFU is against the device's
data-sheet peak bf16 FLOP/s on TPUs and NVIDIA GPUs; on a CPU, which has no
data-sheet figure here, it is against a dense float32 matmul measured in the
same run (so "MFU" there reads: fraction of what this CPU does on one large
matmul).
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
from training import flops  # noqa: E402
from training import state as state_lib  # noqa: E402

_STEPS = flags.DEFINE_integer("steps", 20, "Timed steps (after one warm-up step).")
_VOCAB_SIZE = flags.DEFINE_integer(
    "vocab_size", None, "Vocabulary size when config.model.t5.vocab_size is unset "
    "(default: mT5's 250112 if the config names a gs:// vocabulary, else 1024).")


def random_batch(config, vocab_size, rng):
    """Inputs of the config's shapes: images in [-1, 1], prompts, and full-length targets."""
    b, size = config.batch_size, config.model.image_size
    return {
        "image": rng.uniform(-1, 1, (b, size, size, 3)).astype(np.float32),
        "prompt": rng.integers(2, vocab_size, (b, config.data.max_prompt_len)).astype(np.int32),
        "targets": rng.integers(2, vocab_size, (b, config.data.max_target_len)).astype(np.int32),
    }


def matmul_flops_per_second(n=2048, dtype=jnp.float32, repeats=10):
    """FLOP/s of one n x n matmul on the default device (the CPU's practical peak)."""
    a = jnp.ones((n, n), dtype)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    start = time.perf_counter()
    for _ in range(repeats):
        out = f(a)
    out.block_until_ready()
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def main(argv):
    del argv
    config = train._CONFIG.value  # noqa: SLF001  (the trainer's --config flag)
    vocab_size = config.model.t5.get("vocab_size") or _VOCAB_SIZE.value or (
        250112 if config.vocab.path.startswith("gs://") else 1024)
    mesh = state_lib.make_mesh(config.mesh)
    rules = state_lib.axis_rules(config)
    model = state_lib.create_model(config, vocab_size)
    tx, schedule = state_lib.create_optimizer(config)
    _, shardings = state_lib.state_shardings(model, tx, mesh, rules)
    state = state_lib.init_state(model, tx, jax.random.key(0), shardings)
    batch_sharding = NamedSharding(mesh, P("data"))
    batch = jax.device_put(random_batch(config, vocab_size, np.random.default_rng(0)),
                           batch_sharding)
    step_fn = jax.jit(train.make_train_step(model, tx, schedule, config),
                      in_shardings=(shardings, batch_sharding, None),
                      out_shardings=(shardings, None), donate_argnums=0)
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        compiled = step_fn.lower(state, batch, jax.random.key(1)).compile()
    step_flops = flops.compiled_flops(compiled)
    state, m = compiled(state, batch, jax.random.key(1))  # Warm-up.
    jax.block_until_ready(m)
    start = time.perf_counter()
    for i in range(_STEPS.value):
        state, m = compiled(state, batch, jax.random.key(i))
    jax.block_until_ready(m)
    seconds = (time.perf_counter() - start) / _STEPS.value

    device = jax.devices()[0]
    peak = flops.peak_flops(device)
    peak_source = "data-sheet bf16 peak"
    if peak is None:
        peak = matmul_flops_per_second()
        peak_source = "measured f32 2048x2048 matmul on this device"
    tokens = config.batch_size * (config.data.max_target_len)
    print(f"device: {jax.device_count()} x {device.device_kind}; config: "
          f"batch {config.batch_size}, image {config.model.image_size}, "
          f"dtype {config.model.dtype}, mesh {dict(mesh.shape)}")
    print(f"parameters: {sum(x.size for x in jax.tree.leaves(state['params'])) / 1e6:.1f}M")
    print(f"step time:     {seconds * 1e3:.1f} ms")
    print(f"examples/s:    {config.batch_size / seconds:.1f}")
    print(f"target tokens/s: {tokens / seconds:.0f}")
    if step_flops:
        achieved = step_flops / seconds
        print(f"FLOPs/step:    {step_flops / 1e9:.2f} GFLOP (XLA cost analysis)")
        print(f"achieved:      {achieved / 1e12:.3f} TFLOP/s over {jax.device_count()} device(s)")
        print(f"MFU:           {achieved / (peak * jax.device_count()):.1%} "
              f"(against {peak / 1e12:.3f} TFLOP/s per device: {peak_source})")


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    app.run(main)
