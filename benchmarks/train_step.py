"""Times the training step of a config: compile times, step time, throughput and MFU.

    python benchmarks/train_step.py --config configs/bb.py [--steps 5] \
        [--config.batch_size=32 --config.model.remat=True ...] [--memory_only]

The step is the one `train.py` runs (`training/state.make_train_step`: same model,
loss, Adafactor, shardings over all devices), fed with random inputs of the
config's shapes: images, LangId prompts of 3 tokens, and captions of random
lengths around --caption_len tokens (data/pipeline/packing.synthetic_lengths),
padded to `data.max_target_len`, or packed into rows with `data.pack` (the rows
derived from the same distribution, as train.py derives them from the data).
The data pipeline is not measured (benchmarks/input_pipeline.py does that).
Unless --nopeer, it then measures the other setting of `data.pack` in the same
process and prints packed against padded: examples/s and useful FLOP/s. It prints
- compile times of the state initializer and of the step, and whether JAX's
  persistent compilation cache served them (run the same command twice: the
  second run says "hit"), with the size of their StableHLO;
- XLA's memory analysis of the compiled step and, where the backend reports
  it, the device's peak memory;
- step time, examples/s, target tokens/s (real caption tokens and computed
  positions), model FLOPs per example (training/flops.py: "computed" at the
  lengths the step computes, padded or packed; "useful" at the real lengths;
  rematerialization reported apart), and MFU of both against the data-sheet
  bf16 peak (TPU, NVIDIA GPU) and against a square matmul in the model's dtype
  measured in the same run.

--memory_only compiles the step for abstract inputs (nothing allocated, not
run) and prints the memory analysis: the way to size a config that does not
fit this machine (e.g. Lg's per-device batch for one 80 GB GPU). --json FILE
also writes every figure to FILE (benchmarks/accelerator_report.py reads it).
"""

import collections
import concurrent.futures
import glob
import gzip
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from absl import app, flags, logging  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import errors  # noqa: E402
import files  # noqa: E402
import train  # noqa: E402
from data import pipeline  # noqa: E402
from data.pipeline import packing  # noqa: E402
from model import captioner  # noqa: E402
from training import compilation_cache, flops, losses, run_config, train_input  # noqa: E402
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
_JSON = flags.DEFINE_string("json", None, "Also write the figures to this JSON file.")
_PROFILE = flags.DEFINE_string(
    "profile", None, "Also trace 3 steps with jax.profiler into this folder (its "
    "plugins/profile/*/perfetto_trace.json.gz opens in Perfetto, the folder in TensorBoard), "
    "write the step's optimized HLO there (train_step.hlo.txt: the trace's kernel names are "
    "its instructions) and print the kernels' time per step by part of the step.")
_PEER = flags.DEFINE_bool(
    "peer", True, "Also measure the other setting of config.data.pack and print packed "
    "against padded.")
_TIME_OPTIMIZER = flags.DEFINE_bool(
    "time_optimizer", False, "Also time the optimizer's update alone (Adafactor and applying "
    "it), with XLA's kernel count and bytes accessed of it.")

GIB = 2**30


def text_lengths(config, caption_len, seed):
    """`lengths(count)` of packing.synthetic_lengths around `caption_len`."""
    data = config.data
    return lambda count: packing.synthetic_lengths(count, data.max_prompt_len,
                                                   data.max_target_len, seed, caption_len)


def random_batch(config, vocab_size, rng, caption_len=16, layout=None):
    """Inputs of the training batches' shapes and dtypes (`train_input.abstract_batch`): uint8
    pixels, prompts and random captions, padded, or packed in `layout`'s rows."""
    shapes = pipeline.batch_shapes(config.batch_size, config.model.image_size, config.data)
    (b, max_len), _ = shapes["targets"]
    prompt_lens, lengths = text_lengths(config, caption_len, int(rng.integers(1 << 30)))(b)
    text = {}
    for name, size in (("prompt", prompt_lens), ("targets", lengths)):
        (_, width), _ = shapes[name]
        ids = rng.integers(2, vocab_size, (b, width)).astype(np.int32)
        ids[np.arange(width)[None, :] >= size[:, None]] = 0  # Padding.
        text[name] = ids
    if layout is not None:
        text = packing.pack(text["prompt"], text["targets"], layout, first=0)
    return {"image": rng.integers(0, 256, shapes["image"][0]).astype(np.uint8), **text}


def matmul_flops_per_second(n=1024, dtype=jnp.float32, repeats=10, rounds=5):
    """FLOP/s of one n x n matmul in `dtype` on the default device (its practical peak).

    The best of `rounds` rounds: one round of 10 takes ~2 ms on an H100, so a single
    round caught a hiccup once (247 TFLOP/s where the same machine's other runs gave
    755-786) and put the MFU against it at 114%.
    """
    a = jnp.ones((n, n), dtype)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            out = f(a)
        out.block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 * repeats / best


def compile_timed(jitted, *args):
    """(compiled, {"lower_s", "compile_s", "cache_hit", "cache_dir"}, StableHLO lines) of `jitted`.

    Tracing and lowering to StableHLO run every time; the persistent cache
    saves the XLA compilation only (cache_hit None: the cache was not used).
    """
    start = time.perf_counter()
    lowered = jitted.lower(*args)
    lower_seconds = time.perf_counter() - start
    with compilation_cache.watch() as report:
        compiled = lowered.compile()
    return (compiled, {"lower_s": lower_seconds, "compile_s": report.seconds,
                       "cache_hit": report.hit, "cache_dir": report.cache_dir},
            len(lowered.as_text().splitlines()))


def _compile_text(figures):
    report = compilation_cache.CompileReport(figures["compile_s"], figures["cache_hit"],
                                             figures["cache_dir"])
    return f"lower {figures['lower_s']:.1f} s + compile {report}"


# Opcodes of the optimized HLO that launch no kernel of their own.
_NOT_KERNELS = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while",
                "conditional", "call", "after-all", "partition-id", "replica-id", "iota"}


def hlo_figures(compiled):
    """What XLA made of a compiled program: kernels by opcode, converts, and its cost analysis.

    Counted in the optimized HLO text: "kernels" are the instructions of the
    non-fused computations (the entry, loop bodies) that launch work, a
    fusion counting once; a scanned layer's body is counted once, however
    many layers run it. "converts" counts dtype conversions anywhere,
    inside fusions too. Cost analysis: XLA's FLOPs and bytes accessed of
    one call (the same caveats as `compiled_flops`).
    """
    text = compiled.as_text()
    # Fused computations and reducers (to_apply) run inside another instruction's kernel.
    fused = set(re.findall(r"(?:calls|to_apply)=%?([\w.-]+)", text))
    kernels, converts, current = {}, 0, None
    for line in text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.-]+) .*\{$", line)
        if head:
            current = head.group(1)
            continue
        op = re.match(r"^\s+(?:ROOT )?%?[\w.-]+ = [^=]*? ([a-z][\w-]*)\(", line)
        if not op:
            continue
        opcode = op.group(1)
        converts += opcode == "convert"
        if current not in fused and opcode not in _NOT_KERNELS:
            kernels[opcode] = kernels.get(opcode, 0) + 1
    analysis = compiled.cost_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else {}
    analysis = analysis or {}
    return {"kernels": sum(kernels.values()), "kernels_by_op": dict(sorted(kernels.items())),
            "converts": converts, "xla_flops": analysis.get("flops"),
            "xla_bytes_accessed": analysis.get("bytes accessed")}


def memory_figures(compiled):
    """XLA's memory analysis of a compiled program in GiB (a dict); None where not offered."""
    m = compiled.memory_analysis()
    if m is None:
        return None
    args, out = m.argument_size_in_bytes / GIB, m.output_size_in_bytes / GIB
    alias, temp = m.alias_size_in_bytes / GIB, m.temp_size_in_bytes / GIB
    return {"total_gib": args + out - alias + temp, "arguments_gib": args, "outputs_gib": out,
            "donated_gib": alias, "temporaries_gib": temp}


def memory_lines(memory):
    """`memory_figures` as printed lines."""
    if memory is None:
        return ["memory:        (no analysis on this backend)"]
    return [f"memory:        {memory['total_gib']:.2f} GiB per device by XLA's analysis "
            f"(arguments {memory['arguments_gib']:.2f}, outputs {memory['outputs_gib']:.2f}, of "
            f"which donated {memory['donated_gib']:.2f}, temporaries "
            f"{memory['temporaries_gib']:.2f})"]


def remat_flops_per_example(config, prompt_len, target_len):
    """Extra FLOPs per training example that rematerialization adds (0 without remat).
    "full" reruns all of a layer's forward but its last matmul; "dots" only attention."""
    parts = flops.forward_flops(config, prompt_len, target_len)
    vit, t5 = config.vit, config.t5
    extra = 0
    if vit.remat:
        tokens = flops.vit_tokens(vit, config.image_size)
        if vit.remat_policy == "dots":
            extra += vit.depth * flops.scores_and_mixing(tokens, tokens, vit.width)
        else:
            extra += parts["vit_blocks"] - vit.depth * 2 * tokens * vit.mlp_dim * vit.width
    if t5.remat:
        encoder_len = config.image_tokens + prompt_len
        inner = t5.num_heads * t5.head_dim
        if t5.remat_policy == "dots":
            extra += (t5.num_encoder_layers
                      * flops.scores_and_mixing(encoder_len, encoder_len, inner)
                      + t5.num_decoder_layers
                      * (flops.scores_and_mixing(target_len, target_len, inner)
                         + flops.scores_and_mixing(target_len, encoder_len, inner)))
        else:
            last = 2 * t5.mlp_dim * t5.emb_dim * (t5.num_encoder_layers * encoder_len
                                                 + t5.num_decoder_layers * target_len)
            extra += parts["t5_encoder"] + parts["t5_decoder"] - last
    return float(extra)


def compiled_flops(compiled):
    """XLA's FLOP count of one call of a compiled function (all devices), or None."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, (list, tuple)):  # Older jax: one dict per device program.
        analysis = analysis[0] if analysis else None
    if not analysis or "flops" not in analysis:
        return None
    # The analysis is of the per-device SPMD program; the step runs on every device.
    return float(analysis["flops"]) * jax.device_count()


def flop_figures(model_config, config, sums, layout, step_seconds, peaks):
    """Model FLOPs per example (computed: padded or packed in `layout`; useful: at the real
    lengths, `losses.length_sums`), remat's extra, MFU of both per peak."""
    prompt_len, max_len, b = config.data.max_prompt_len, config.data.max_target_len, \
        config.batch_size
    parts = flops.forward_flops(model_config, prompt_len, max_len)
    out = {
        "per_example": flops.train_step_flops(
            model_config, b, layout.prompt_len if layout else prompt_len, max_len,
            layout and layout.rows) / b,
        "forward_parts": {
            "vit": parts["vit_stem"] + parts["vit_blocks"] + parts["vit_head"],
            "t5_encoder": parts["t5_encoder"], "t5_decoder": parts["t5_decoder"],
            "t5_logits": parts["t5_logits"]},
        "per_example_padded": flops.train_step_flops(model_config, 1, prompt_len, max_len),
        "per_example_useful": flops.useful_step_flops(model_config, b, sums) / b,
        "remat_per_example": remat_flops_per_example(model_config, prompt_len, max_len),
    }
    if step_seconds:
        for kind, per_example in (("computed", out["per_example"]),
                                  ("useful", out["per_example_useful"])):
            out[f"{kind}_per_s"] = b * per_example / step_seconds
            out[f"mfu_{kind}"] = {name: out[f"{kind}_per_s"] / (peak * jax.device_count())
                                  for name, peak in peaks}
    return out


def flop_lines(figures, config, peaks):
    """`flop_figures` as printed lines."""
    per_example, parts = figures["per_example"], figures["forward_parts"]
    max_len, padded = config.data.max_target_len, figures["per_example_padded"]
    lines = [f"model FLOPs:   {padded / 1e9:.4g} GFLOP per training example at "
             f"{max_len} target positions (3x forward {sum(parts.values()) / 1e9:.4g}: ViT "
             f"{parts['vit'] / 1e9:.4g}, mT5 encoder {parts['t5_encoder'] / 1e9:.4g}, decoder "
             f"{parts['t5_decoder'] / 1e9:.4g}, logits {parts['t5_logits'] / 1e9:.4g})"]
    useful = figures["per_example_useful"]
    lines.append(f"computed:      {per_example / 1e9:.4g} GFLOP per example "
                 f"({'packed rows' if config.data.pack else 'padded'}), "
                 f"{per_example / useful:.2f}x the {useful / 1e9:.4g} GFLOP at the real lengths "
                 f"(useful): {1 - useful / per_example:.0%} of the computed FLOPs are on "
                 f"positions without a token")
    remat = figures["remat_per_example"]
    if remat:
        lines.append(f"remat:         recomputes {remat / 1e9:.4g} GFLOP per example in the "
                     f"backward pass: the hardware does {1 + remat / per_example:.2f}x the "
                     f"model FLOPs (not counted in MFU)")
    if "computed_per_s" in figures:
        lines.append(f"achieved:      {figures['computed_per_s'] / 1e12:.3f} TFLOP/s computed, "
                     f"{figures['useful_per_s'] / 1e12:.3f} useful, over {jax.device_count()} "
                     f"device(s)")
        for name, peak in peaks:
            lines.append(f"MFU:           computed {figures['mfu_computed'][name]:.1%}, useful "
                         f"{figures['mfu_useful'][name]:.1%} of {peak / 1e12:.3g} TFLOP/s per "
                         f"device ({name})")
    return lines


def _build(config, vocab_size, steps, caption_len):
    """(mesh, rules, model, tx, schedule) of the config; ValueError names a bad field."""
    for name, value in (("--steps", steps), ("--caption_len", caption_len),
                        ("--vocab_size", vocab_size)):
        if value < 1:
            raise ValueError(f"{name}={value} must be at least 1")
    run_config.check(config)
    mesh = state_lib.make_mesh(config.mesh)
    if config.batch_size % mesh.shape["data"]:
        raise ValueError(f"--config.batch_size={config.batch_size} does not divide over the "
                         f"{mesh.shape['data']} devices of the data axis")
    model = captioner.from_config(config.model, vocab_size)
    tx, schedule = state_lib.create_optimizer(config)
    return mesh, state_lib.axis_rules(config), model, tx, schedule


def optimizer_figures(tx, state, repeats=10):
    """The optimizer's update alone on `state`'s parameters: ms per call, kernels, bytes.

    Each call is timed to its end and the median taken: the mean of calls queued back to back
    swung from 6 to 46 ms per call on one H200 (donated or not, in the process that had run the
    steps), while each call alone took 8 ms and the step's profile gives its kernels 4-6 ms."""
    def update(params, grads, opt_state):
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    params, opt_state = state["params"], state["opt_state"]
    grads = jax.tree.map(lambda p: 1e-3 * p, params)
    compiled = jax.jit(update).lower(params, grads, opt_state).compile()
    jax.block_until_ready(compiled(params, grads, opt_state))
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(params, grads, opt_state))
        seconds.append(time.perf_counter() - start)
    hlo = hlo_figures(compiled)
    return {"ms": 1e3 * float(np.median(seconds)), "kernels": hlo["kernels"],
            "xla_bytes_accessed": hlo["xla_bytes_accessed"],
            "parameter_bytes": sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params))}


def measure(config, vocab_size, *, steps=5, caption_len=16, memory_only=False,
            time_optimizer=False, profile_dir=None, say=print):
    """Compiles and times the train step of `config`; returns its figures (a dict).

    Prints each figure with `say` as soon as it is known. The persistent
    compilation cache is whatever the caller enabled.

    Raises:
        ValueError: a bad config field or argument (the message names it).
    """
    mesh, rules, model, tx, schedule = _build(config, vocab_size, steps, caption_len)
    abstract, shardings = state_lib.state_shardings(model, tx, mesh, rules)
    batch_sharding = NamedSharding(mesh, P("data"))
    device = jax.devices()[0]
    cfg = model.config
    out = {"device": device.device_kind, "device_count": jax.device_count(),
           "platform": device.platform, "jax_version": jax.__version__,
           "batch_size": config.batch_size,
           "grad_accum_steps": config.grad_accum_steps, "image_size": cfg.image_size,
           "dtype": config.model.dtype, "scan": cfg.t5.scan, "remat": cfg.t5.remat,
           "max_target_len": config.data.max_target_len, "vocab_size": vocab_size,
           "pack": config.data.pack,
           "parameters": sum(x.size for x in jax.tree.leaves(abstract["params"]))}
    # Rows derived as train.py does, from the stated distribution.
    layout = packing.layout(config, data_devices=mesh.shape["data"],
                            image_tokens=model.num_image_tokens,
                            lengths=text_lengths(config, caption_len, seed=1))
    if layout:
        out["rows"] = layout.rows
    say(f"device: {jax.device_count()} x {device.device_kind}; config: batch "
        f"{config.batch_size}, image {cfg.image_size}, dtype {config.model.dtype}, "
        f"scan {cfg.t5.scan}, remat {cfg.t5.remat}, mesh {dict(mesh.shape)}, fsdp "
        f"{config.mesh.fsdp}, targets padded to {config.data.max_target_len}"
        + (f", packed into {layout.rows} rows" if layout else ""))
    say(f"parameters:    {out['parameters'] / 1e6:.1f}M")

    init_fn = state_lib.init_state_fn(model, tx, shardings)
    step_fn = jax.jit(state_lib.make_train_step(model, tx, schedule, config),
                      in_shardings=(shardings, batch_sharding, None),
                      out_shardings=(shardings, None), donate_argnums=0)

    def compile_step():
        with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
            return compile_timed(step_fn, abstract,
                                 train_input.abstract_batch(config, batch_sharding, layout),
                                 jax.random.key(1))

    # As train.py: the step compiles in a thread while the initializer compiles.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending_step = pool.submit(compile_step)
        compiled_init, init_report, init_lines = compile_timed(init_fn, jax.random.key(0))
        compiled, step_report, step_lines = pending_step.result()
    out["compile_init"] = {**init_report, "stablehlo_lines": init_lines}
    say(f"compile init:  {_compile_text(init_report)}; StableHLO {init_lines} lines")
    out["compile_step"] = {**step_report, "stablehlo_lines": step_lines}
    say(f"compile step:  {_compile_text(step_report)}; StableHLO {step_lines} lines")
    out.update(compiled_figures(compiled, say))
    rng = np.random.default_rng(0)
    batch = random_batch(config, vocab_size, rng, caption_len, layout)
    sums = jax.tree.map(int, losses.length_sums(batch, model.num_image_tokens))
    if layout:
        out["pack_dropped"] = int(config.batch_size - batch["packed"].sum())
        say(f"packing:       {config.batch_size} examples in {layout.rows} rows, "
            f"{out['pack_dropped']} left out of this batch's loss")
    limit = (device.memory_stats() or {}).get("bytes_limit")
    if limit and out["memory_analysis"] and out["memory_analysis"]["total_gib"] > limit / GIB:
        out.update(does_not_fit=True, device_memory_gib=limit / GIB)
        say(f"not run:       XLA's memory analysis exceeds the device's "
            f"{limit / GIB:.1f} GiB")
        memory_only = True
    if memory_only:
        out["flops"] = flop_figures(cfg, config, sums, layout, None, [])
        say("\n".join(flop_lines(out["flops"], config, [])))
        return out

    state = compiled_init(jax.random.key(0))
    state, seconds = time_steps(compiled, state, jax.device_put(batch, batch_sharding), steps,
                                out, profile_dir, say)
    out.update(throughput_figures(config, device, sums["dec"], layout and layout.rows, seconds,
                                  steps, say))
    dtype = jnp.bfloat16 if config.model.dtype == "bfloat16" else jnp.float32
    peaks = []
    if flops.peak_flops(device):
        peaks.append(("data-sheet dense bf16 peak", flops.peak_flops(device)))
    # A CPU reaches the same FLOP/s at 1024 as at 2048 (~200 GFLOP/s on this 2-core machine),
    # in a fifth of the time.
    accelerator = device.platform in ("gpu", "tpu")
    n = 4096 if accelerator else 1024
    out["matmul_flops_per_s"] = matmul_flops_per_second(n, dtype, rounds=5 if accelerator else 1)
    peaks.append((f"a {n}x{n} {jnp.dtype(dtype).name} matmul measured in this run",
                  out["matmul_flops_per_s"]))
    out["peaks"] = dict(peaks)
    out["flops"] = flop_figures(cfg, config, sums, layout, seconds, peaks)
    say("\n".join(flop_lines(out["flops"], config, peaks)))
    if time_optimizer:
        o = out["optimizer"] = optimizer_figures(tx, state)
        say(f"optimizer:     {o['ms']:.1f} ms for the update alone ({o['ms'] / 1e3 / seconds:.0%} "
            f"of a step), {o['kernels']} kernels, XLA's bytes accessed "
            f"{o['xla_bytes_accessed'] / o['parameter_bytes']:.1f}x the parameters'")
    return out


def compiled_figures(compiled, say):
    """XLA's memory analysis, FLOP count and kernel census of the compiled step."""
    out = {"memory_analysis": memory_figures(compiled)}
    say("\n".join(memory_lines(out["memory_analysis"])))
    out["xla_flops"] = compiled_flops(compiled)
    if out["xla_flops"]:
        say(f"XLA's count:   {out['xla_flops'] / 1e9:.1f} GFLOP per step (its cost analysis: "
            f"counts a scanned layer stack once and, on GPUs, misses library-call dots)")
    hlo = out["hlo"] = hlo_figures(compiled)
    top = sorted(hlo["kernels_by_op"].items(), key=lambda kv: -kv[1])[:6]
    say(f"optimized HLO: {hlo['kernels']} kernels ("
        + ", ".join(f"{n} {op}" for op, n in top) + f"), {hlo['converts']} converts, "
        + (f"{hlo['xla_bytes_accessed'] / GIB:.2f} GiB accessed by XLA's cost analysis"
           if hlo["xla_bytes_accessed"] else "no cost analysis"))
    return out


def time_steps(compiled, state, batch, steps, out, profile_dir, say):
    """Runs a warm-up step and `steps` timed ones; returns (state, seconds per step).

    Records in `out` when the first step ended and the last loss; with `profile_dir`,
    traces 3 more steps there and writes the step's optimized HLO beside the trace.
    """
    state, m = compiled(state, batch, jax.random.key(1))  # Warm-up.
    jax.block_until_ready(m)
    out["first_step_done_unix_s"] = time.time()
    start = time.perf_counter()
    for i in range(steps):
        state, m = compiled(state, batch, jax.random.key(i))
    jax.block_until_ready(m)
    seconds = (time.perf_counter() - start) / steps
    out["loss"] = float(m["train/loss"])
    if profile_dir:
        with jax.profiler.trace(profile_dir, create_perfetto_trace=True):
            for i in range(3):
                state, m = compiled(state, batch, jax.random.key(i))
            jax.block_until_ready(m)
        hlo_text = compiled.as_text()
        files.write_text(os.path.join(profile_dir, "train_step.hlo.txt"), hlo_text)
        say(f"profile:       3 steps traced into {profile_dir}")
        kernels = out["kernels"] = kernel_times(profile_dir, hlo_text, steps=3)
        if kernels:
            parts = sorted(kernels["parts_ms"].items(), key=lambda kv: -kv[1])
            say(f"kernels:       busy {kernels['busy_ms']:.1f} ms of a {1e3 * seconds:.1f} ms "
                "step: " + ", ".join(f"{part} {ms:.1f}" for part, ms in parts))
            say("longest:       " + "; ".join(f"{name[:48]} {ms:.2f} ms"
                                             for name, ms in kernels["longest"]))
    return state, seconds


# Kernels of the GPU's matmul and attention libraries (cuBLAS, cuDNN) and XLA's GEMM fusions.
_MATMUL_KERNEL = re.compile(r"gemm|cutlass|xmma|nvjet|cublas|cudnn|sdpa|fmha|flash", re.I)


def _kernel_name(name):
    """An HLO instruction's name as a profiler names its kernel ('fusion.12' -> 'fusion_12')."""
    return re.sub(r"[.\-]", "_", name)


def kernel_part(kernel, op_name):
    """Which part of the step a kernel works for: "matmul" (by the kernel's name: GPUs only),
    else by the JAX op its HLO came from: "forward" (under jvp), "backward" (under transpose),
    "other" (neither: the optimizer, the loss's sums), "unattributed" (no op: copies, memsets)."""
    if _MATMUL_KERNEL.search(kernel):
        return "matmul"
    if "transpose(" in op_name:
        return "backward"
    if "jvp(" in op_name:
        return "forward"
    return "other" if op_name else "unattributed"


def kernel_times(profile_dir, hlo_text, steps):
    """Where the device's time went in `steps` traced steps (the newest Perfetto trace that
    `jax.profiler` wrote under `profile_dir`; `hlo_text`, the step's optimized HLO, names the
    JAX op of each kernel): ms per step busy, by `kernel_part`, and the 5 longest kernels.
    None without a trace or for one without a device (a CPU's: its work is events of host
    threads)."""
    traces = glob.glob(os.path.join(profile_dir, "**", "perfetto_trace.json.gz"), recursive=True)
    if not traces:
        return None
    with gzip.open(max(traces, key=os.path.getmtime), "rt") as f:
        events = json.load(f)["traceEvents"]
    op_names = {_kernel_name(m.group(1)): m.group(2) for m in re.finditer(
        r'^\s*(?:ROOT )?%?([\w.\-]+) = [^\n]*?op_name="([^"]*)"', hlo_text, re.M)}
    devices = {e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
               and e["args"]["name"].startswith("/device:")}
    if not devices:
        return None
    kernels = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e["pid"] in devices:
            kernels[e["name"]] += e["dur"] / 1e3 / steps
    parts = collections.Counter()
    for name, ms in kernels.items():
        parts[kernel_part(name, op_names.get(_kernel_name(name), ""))] += ms
    return {"busy_ms": sum(kernels.values()), "parts_ms": dict(parts),
            "longest": kernels.most_common(5)}


def throughput_figures(config, device, real_tokens, rows, seconds, steps, say):
    """Peak memory, step time, examples/s and real/computed target tokens/s of the timed steps
    (computed: every position of the examples' padded targets, or of the packed `rows`)."""
    out = {}
    stats = device.memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        out["peak_memory_gib"] = stats["peak_bytes_in_use"] / GIB
        say(f"peak memory:   {out['peak_memory_gib']:.2f} GiB on device 0 (reported by the "
            f"backend)")
    computed_tokens = (rows or config.batch_size) * config.data.max_target_len
    out.update(step_s=seconds, steps=steps, examples_per_s=config.batch_size / seconds,
               real_tokens_per_s=real_tokens / seconds,
               computed_tokens_per_s=computed_tokens / seconds)
    say(f"step time:     {seconds * 1e3:.1f} ms (mean of {steps} after a warm-up)")
    say(f"examples/s:    {out['examples_per_s']:.2f}")
    say(f"target tok/s:  real {out['real_tokens_per_s']:.0f} (captions of "
        f"{real_tokens / config.batch_size:.1f} tokens on average), computed "
        f"{out['computed_tokens_per_s']:.0f} ({computed_tokens / config.batch_size:.1f} "
        f"positions per example)")
    return out


def packed_vs_padded(packed, padded, say):
    """The ratios of a packed measurement's examples/s and useful FLOP/s to a padded one's."""
    out = {"examples_per_s": packed["examples_per_s"] / padded["examples_per_s"],
           "useful_flops_per_s": (packed["flops"]["useful_per_s"]
                                  / padded["flops"]["useful_per_s"]),
           "computed_over_useful": (packed["flops"]["per_example"]
                                    / packed["flops"]["per_example_useful"])}
    say(f"\npacked vs padded: {out['examples_per_s']:.2f}x examples/s, "
        f"{out['useful_flops_per_s']:.2f}x useful FLOP/s ({packed['batch_size']} examples a step "
        f"each, {packed['pack_dropped']} left out of the packed loss); packed computes "
        f"{out['computed_over_useful']:.2f}x the useful FLOPs per example")
    return out


def default_vocab_size(config, flag_value=None):
    """config.model.t5.vocab_size, else the flag, else mT5's for gs:// vocabularies, else 1024."""
    return config.model.t5.get("vocab_size") or flag_value or (
        250112 if config.vocab.path.startswith("gs://") else 1024)


def main(argv):
    del argv
    if not flags.FLAGS["verbosity"].present:
        errors.quiet_native_logs()
        logging.set_verbosity(logging.WARNING)  # Library INFO logs off unless asked for.
    config = train._CONFIG.value  # noqa: SLF001  (the trainer's --config flag)
    compilation_cache.enable_from_flag(train._COMPILATION_CACHE.value)  # noqa: SLF001  The trainer's flag.
    say = lambda s: print(s, flush=True)  # noqa: E731
    try:
        figures = measure(config, default_vocab_size(config, _VOCAB_SIZE.value),
                          steps=_STEPS.value, caption_len=_CAPTION_LEN.value,
                          memory_only=_MEMORY_ONLY.value, time_optimizer=_TIME_OPTIMIZER.value,
                          profile_dir=_PROFILE.value, say=say)
        if _PEER.value and "step_s" in figures:
            peer_config = config.copy_and_resolve_references()
            with peer_config.unlocked():
                peer_config.data.pack = not config.data.pack
            say(f"\n-- the peer: config.data.pack={peer_config.data.pack}")
            peer = figures["peer"] = measure(
                peer_config, default_vocab_size(config, _VOCAB_SIZE.value), steps=_STEPS.value,
                caption_len=_CAPTION_LEN.value, say=say)
            figures["packed_vs_padded"] = packed_vs_padded(
                *((figures, peer) if config.data.pack else (peer, figures)), say)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if _JSON.value:
        with open(_JSON.value, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    # train.py's parser: a misspelled --config.<field> is one `error:` line, status 2.
    app.run(main, flags_parser=train.parse_flags)
