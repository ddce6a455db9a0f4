"""Every accelerator figure of the training and decoding work, in one command: a table + JSON.

    python benchmarks/accelerator_report.py [--json report.json] [--steps 10]
    python benchmarks/accelerator_report.py --tiny   # the same code on tiny shapes (CPU, ~1 min)

Needs no network, no dataset and no TensorFlow: inputs are random, the demo
captions are generated. Each measurement runs in a fresh child process (so
that its peak memory is its own and running out of memory ends only that
child), all sharing one new persistent compilation cache. This process never
touches the accelerator itself. Sections, in the order they run:

1. target length: `python -m tools.target_length`'s suggestion for the demo
   captions in the demo vocabulary (written to a temporary folder).
2. launch: BB bf16 at batch 256 with (full) remat and 64 target positions,
   packed (config.data.pack, BB's setting), started twice
   (benchmarks/train_step.py): the first process compiles into the empty
   cache (cold), the second loads from it (warm). Launch to first
   step is the wall time from starting the process to the end of its first
   step, data pipeline excluded; the initializer's and the step's compile
   times are reported apart. The warm run also times the optimizer's update
   alone and traces 3 steps: their kernels' time by part of the step (on a
   device; benchmarks/train_step.py --profile).
3. BB bf16 batch 256 padded with remat policy "full", with "dots" (the
   matmul outputs kept) and without remat, at 64 target positions and at the
   suggested length, then packed as the launch: step time, examples/s, real
   and computed target tokens/s, MFU of the FLOPs computed and of the useful
   ones by the analytic count (training/flops.py) against the data-sheet
   bf16 peak and against a square matmul measured in the same process, peak
   memory, XLA's memory analysis. A variant whose memory analysis exceeds the
   device's memory is reported as not fitting, not run.
4. decoding and attention (one process): greedy and beam-4 BB captions/s
   (bf16, random weights, EOS off, benchmarks/decode_speed.py); forward +
   backward of `jax.nn.dot_product_attention` with cuDNN's and XLA's
   implementation at BB's four attention shapes ("not available" where cuDNN
   cannot run them, e.g. on a CPU).
5. Bg and Lg at their one-GPU settings (docs/training.md: no FSDP, batch 2048
   as 8 micro-batches of 256, remat), a few steps each.

--tiny runs every section on the `:smoke` towers, small batches and short
captions, one length and one remat policy (the test suite runs it, so that
the command cannot rot). --only
picks sections; --json also writes the figures (updated after each section,
so a run cut short keeps what it measured).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

SECTIONS = ("target_len", "launch", "bb", "decoding", "attention", "bg_lg")
CHILD_SECTIONS = ("decoding", "attention")  # Measured in one child process.
GIB = 2**30


# ------------------------------------------------------------- settings ----
def settings(tiny):
    """The shapes of every section: the real ones, or tiny ones with the same code paths."""
    if tiny:
        smoke = ["--config.mesh.fsdp=False"]
        return dict(
            # One length (the suggested one) and one remat policy (the launch's): few compiles.
            bb="configs/bb.py:smoke", bb_flags=smoke + ["--config.batch_size=4"],
            long_len=None, remats=("full",),
            demo=dict(num_train=40, num_restval=8, num_val=4, num_test=4, num_xm3600=4,
                      image_size=32, vocab_size=300),
            big=[("bg", "configs/bg.py:smoke")],  # Lg's smoke towers compile to the same program.
            big_flags=smoke + ["--config.batch_size=8", "--config.grad_accum_steps=2"],
            big_steps=1, decode=dict(batch=2, max_len=4), attention_batch=2)
    return dict(
        bb="configs/bb.py", bb_flags=["--config.batch_size=256"], long_len=64,
        remats=("full", "dots", None), demo={},
        big=[("bg", "configs/bg.py"), ("lg", "configs/lg.py")],
        big_flags=["--config.mesh.fsdp=False", "--config.batch_size=2048",
                   "--config.grad_accum_steps=8"],
        big_steps=2, decode=dict(batch=128, max_len=64), attention_batch=256)


# ------------------------------------------------------------- children ----
def run_child(args, json_path, timeout, say):
    """Runs `python *args` in the repository; returns (figures or None, wall s, error or None).

    Its output goes to this process's stderr as progress; its figures come
    from the JSON file it writes, with "launch_s" (from starting the process
    to the end of its first step) added when it reports that moment.
    """
    start_unix, start = time.time(), time.perf_counter()
    say(f"$ python {' '.join(args)}")
    # JAX takes 75% of a GPU's memory by default; one process at a time may take more.
    env = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.92", **os.environ}
    try:
        proc = subprocess.run([sys.executable, *args], cwd=REPO, timeout=timeout, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - start, f"timed out after {timeout} s"
    seconds = time.perf_counter() - start
    for line in proc.stdout.splitlines():
        say(f"  {line}")
    if proc.returncode:
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        # The exception's own line, not JAX's note on filtered frames that follows it.
        raised = [line for line in lines
                  if re.match(r"\s*[\w.]+(Error|Exception|Exhausted)\b", line)]
        tail = (raised or lines or [""])[-1].strip()
        if "RESOURCE_EXHAUSTED" in proc.stdout or "out of memory" in proc.stdout.lower():
            tail = "out of memory: " + tail
        return None, seconds, f"exit status {proc.returncode}: {tail[:300]}"
    with open(json_path, encoding="utf-8") as f:
        figures = json.load(f)
    if "first_step_done_unix_s" in figures:
        figures["launch_s"] = figures["first_step_done_unix_s"] - start_unix
    return figures, seconds, None


def train_step_child(config, flags, steps, cache_dir, out_dir, name, timeout, say):
    """benchmarks/train_step.py on `config` + `flags` in a child; returns run_child's triple."""
    path = os.path.join(out_dir, f"{name}.json")
    args = ["benchmarks/train_step.py", "--config", config, *flags, "--steps", str(steps),
            "--compilation_cache", cache_dir, "--json", path, "--nopeer"]
    return run_child(args, path, timeout, say)


def section_child(sections, tiny, out_dir, timeout, say):
    """The in-process sections of this script (decoding, attention) in one child."""
    path = os.path.join(out_dir, "sections.json")
    args = ["benchmarks/accelerator_report.py", "--child", ",".join(sections), "--json", path]
    if tiny:
        args.append("--tiny")
    return run_child(args, path, timeout, say)


# --------------------------------------------------- in-child sections ----
def decoding_figures(tiny):
    """Greedy and beam-4 captions/s of BB (bf16) with benchmarks/decode_speed.py's timer."""
    from benchmarks import decode_speed  # noqa: PLC0415  Imports jax: children only.
    from configs import bb  # noqa: PLC0415

    s = settings(tiny)
    model = bb.get_config("smoke" if tiny else None).model.to_dict()
    if tiny:
        model["t5"]["vocab_size"] = 1024
    rows = decode_speed.bench_size("bb", s["decode"]["batch"], s["decode"]["max_len"], 4,
                                   repeats=2, methods=("greedy (cache)", "beam 4 (cache)"),
                                   model_config=model)
    return {"rows": rows}


def attention_shapes(config, batch):
    """BB's attention calls: (name, batch, q_len, kv_len, heads, head_dim, bias shape, causal)."""
    from model import captioner  # noqa: PLC0415
    from model import vit as vit_lib  # noqa: PLC0415

    cfg = captioner.from_config(config.model, 1024).config
    vit, t5 = cfg.vit, cfg.t5
    patches = vit_lib.num_patches(vit, cfg.image_size) + (vit.pool == "tok")
    encoder = 1 + config.data.max_prompt_len
    target = config.data.max_target_len
    vit_heads = (vit.num_heads, vit.width // vit.num_heads)
    t5_heads = (t5.num_heads, t5.head_dim)
    return [
        ("ViT self-attention", batch, patches, patches, *vit_heads, None),
        ("mT5 encoder self-attention (positions + padding)", batch, encoder, encoder,
         *t5_heads, (batch, t5.num_heads, encoder, encoder)),
        ("mT5 decoder self-attention (positions + causal)", batch, target, target, *t5_heads,
         (1, t5.num_heads, target, target)),
        ("mT5 cross-attention (padding)", batch, target, encoder, *t5_heads,
         (batch, 1, target, encoder)),
    ]


def attention_figures(tiny):
    """Forward + backward ms of each BB attention shape with cuDNN's and XLA's implementation."""
    import jax  # noqa: PLC0415  Children only.
    import jax.numpy as jnp  # noqa: PLC0415

    from configs import bb  # noqa: PLC0415

    s = settings(tiny)
    config = bb.get_config("smoke" if tiny else None)
    rows = []
    for name, b, t, kv, heads, dim, bias_shape in attention_shapes(config, s["attention_batch"]):
        keys = jax.random.split(jax.random.key(0), 4)
        q = jax.random.normal(keys[0], (b, t, heads, dim), jnp.bfloat16)
        k = jax.random.normal(keys[1], (b, kv, heads, dim), jnp.bfloat16)
        v = jax.random.normal(keys[2], (b, kv, heads, dim), jnp.bfloat16)
        bias = (None if bias_shape is None
                else jax.random.normal(keys[3], bias_shape, jnp.bfloat16))
        row = {"attention": name, "batch": b, "q_len": t, "kv_len": kv, "heads": heads,
               "head_dim": dim, "bias": bias_shape}
        for implementation in ("cudnn", "xla"):
            try:
                row[implementation + "_ms"] = 1e3 * _time_attention(q, k, v, bias, implementation)
            except Exception as e:  # noqa: BLE001  cuDNN refuses shapes and backends its own way.
                row[implementation + "_ms"] = None
                row[implementation + "_error"] = f"not available: {str(e).splitlines()[0][:200]}"
        rows.append(row)
    return {"rows": rows}


def _time_attention(q, k, v, bias, implementation, repeats=5):
    """Best seconds of one forward + backward (gradients of q, k, v and the bias)."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    from model import layers  # noqa: PLC0415

    def loss(q, k, v, bias):
        if bias is None:  # As the model calls it: odd lengths padded (cuDNN's need).
            out = layers.even_length_attention(q, k, v, implementation=implementation)
        else:
            out = jax.nn.dot_product_attention(q, k, v, bias=bias, scale=1.0,
                                               implementation=implementation)
        return jnp.sum(out.astype(jnp.float32))

    argnums = (0, 1, 2) if bias is None else (0, 1, 2, 3)
    step = jax.jit(jax.grad(loss, argnums=argnums))
    jax.block_until_ready(step(q, k, v, bias))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(step(q, k, v, bias))
        best = min(best, time.perf_counter() - start)
    return best


# ------------------------------------------------------ target length ----
def suggested_target_len(demo_sizes, say):
    """`python -m tools.target_length`'s suggestion for the demo captions and vocabulary."""
    from configs import demo as demo_config  # noqa: PLC0415
    from data import tokenizer  # noqa: PLC0415
    from tools import (
        demo,  # noqa: PLC0415
        target_length,  # noqa: PLC0415
    )

    with tempfile.TemporaryDirectory(prefix="accelerator_report_demo_") as folder:
        written = demo.generate(folder, build_tfds=False, vifidel=False, **demo_sizes)
        config = demo_config.get_config()
        vocab = tokenizer.get_vocabulary(written["vocab"])
        data = config.data.copy_and_resolve_references()
        data.unlock()
        data.manual_dir = written["coco35l"]
        captions = target_length.read_captions(data)
        lengths = [target_length.piece_lengths(vocab, target_length.sample(c, 5000))
                   for c in captions.values()]
    import numpy as np  # noqa: PLC0415

    pooled = np.concatenate(lengths)
    suggested = target_length.smallest_length(pooled)
    say(f"target length: {suggested} (smallest multiple of {target_length.MULTIPLE} holding "
        f"{target_length.COVERAGE:g}% of {len(pooled)} demo captions in the demo vocabulary)")
    return {"suggested": suggested, "captions": len(pooled),
            "p99_9": target_length.length_holding(pooled, target_length.COVERAGE)}


# ---------------------------------------------------------------- table ----
def _ms(seconds):
    return f"{seconds * 1e3:.1f} ms" if seconds is not None else "-"


def _compile(figures):
    hit = {True: "hit", False: "miss", None: "no cache"}[figures["cache_hit"]]
    return f"{figures['lower_s']:.1f} s + {figures['compile_s']:.1f} s ({hit})"


def _peak_name(name):
    return "data sheet" if "data-sheet" in name else "matmul"


def step_summary(figures):
    """One table cell for a train_step.py child's figures."""
    if figures.get("does_not_fit"):
        return (f"does not fit: XLA's memory analysis {figures['memory_analysis']['total_gib']:.1f}"
                f" GiB > {figures['device_memory_gib']:.1f} GiB of device memory")
    mfu = figures["flops"]
    parts = [f"{_ms(figures['step_s'])}/step", f"{figures['examples_per_s']:.0f} examples/s",
             f"target tokens/s real {figures['real_tokens_per_s']:.0f}, computed "
             f"{figures['computed_tokens_per_s']:.0f}",
             "MFU computed / useful " + ", ".join(
                 f"{value:.1%} / {mfu['mfu_useful'][name]:.1%} ({_peak_name(name)})"
                 for name, value in mfu["mfu_computed"].items())]
    if "peak_memory_gib" in figures:
        parts.append(f"peak {figures['peak_memory_gib']:.1f} GiB")
    if figures.get("memory_analysis"):
        parts.append(f"XLA {figures['memory_analysis']['total_gib']:.1f} GiB")
    return "; ".join(parts)


def table(report):
    """The report as one markdown table: | section | setting | result |."""
    rows = []
    device = report.get("device")
    if device:
        peak = device.get("data_sheet_peak_flops")
        rows.append(("device", f"{device['count']} x {device['kind']}",
                     f"jax {device['jax']}; data-sheet bf16 peak "
                     f"{peak / 1e12:.0f} TFLOP/s" if peak else f"jax {device['jax']}; no "
                     f"data-sheet peak for this device"))
        rows.append(("matmul", device["matmul"], f"{device['matmul_flops_per_s'] / 1e12:.3g} "
                                                 f"TFLOP/s"))
    if "target_len" in report:
        t = report["target_len"]
        rows.append(("target length", "tools.target_length on the demo captions",
                     f"{t['suggested']} (99.9% of {t['captions']} captions hold in "
                     f"{t['p99_9']} pieces + EOS)"))
    for name, entry in report.get("launch", {}).items():
        if entry.get("error"):
            rows.append(("launch", name, entry["error"]))
            continue
        f = entry["figures"]
        rows.append(("launch to first step", f"{entry['setting']}, {name}",
                     f"{f['launch_s']:.1f} s (initializer {_compile(f['compile_init'])}, step "
                     f"{_compile(f['compile_step'])})"))
    warm = (report.get("launch", {}).get("warm") or {}).get("figures") or {}
    if warm.get("optimizer"):
        o = warm["optimizer"]
        rows.append(("optimizer", "Adafactor's update alone, after the warm launch's steps",
                     f"{o['ms']:.1f} ms ({o['kernels']} kernels, "
                     f"{o['xla_bytes_accessed'] / 1e9:.1f} GB accessed)"))
    if warm.get("kernels"):  # A device's trace (a CPU's has none).
        k = warm["kernels"]
        parts = sorted(k["parts_ms"].items(), key=lambda kv: -kv[1])
        rows.append(("kernels", "3 traced steps of the warm launch, ms a step",
                     f"busy {k['busy_ms']:.1f} of {1e3 * warm['step_s']:.1f}: "
                     + ", ".join(f"{part} {ms:.1f}" for part, ms in parts) + "; longest "
                     + "; ".join(f"{name[:40]} {ms:.2f}" for name, ms in k["longest"][:3])))
    for entry in report.get("bb", []):
        result = entry["error"] if entry.get("error") else step_summary(entry["figures"])
        rows.append(("train step", entry["setting"], result))
    for row in report.get("decoding", {}).get("rows", []):
        rows.append(("decoding", f"BB bf16 {row['method']}, batch {row['batch']}, "
                                 f"{row['tokens']} tokens", f"{row['captions_per_s']:.1f} "
                                                            f"captions/s"))
    for row in report.get("attention", {}).get("rows", []):
        cells = []
        for implementation in ("cudnn", "xla"):
            ms = row.get(implementation + "_ms")
            cells.append(f"{implementation} " + (f"{ms:.2f} ms" if ms is not None
                                                 else row[implementation + "_error"]))
        rows.append(("attention fwd+bwd", f"{row['attention']} [{row['batch']}, {row['q_len']}"
                                          f"x{row['kv_len']}, {row['heads']}x{row['head_dim']}]",
                     "; ".join(cells)))
    for entry in report.get("bg_lg", []):
        result = entry["error"] if entry.get("error") else step_summary(entry["figures"])
        rows.append(("train step", entry["setting"], result))
    for section, error in report.get("errors", {}).items():
        rows.append((section, "", error))
    lines = ["| section | setting | result |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------- main ----
def _remat_flags(policy):
    """Flags of a remat policy (model/layers.REMAT_POLICIES), or of no remat (None)."""
    if policy is None:
        return ["--config.model.remat=False"]
    return ["--config.model.remat=True", f"--config.model.remat_policy={policy}"]


def _setting(config, flags):
    return " ".join([config, *(f.removeprefix("--config.") for f in flags)])


def build_report(args, say):
    """Runs the sections; returns the report dict (written to --json after each section)."""
    s = settings(args.tiny)
    report = {"tiny": args.tiny, "errors": {}}
    out_dir = tempfile.mkdtemp(prefix="accelerator_report_")
    cache_dir = args.cache_dir or os.path.join(out_dir, "compilation_cache")
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    steps = args.steps or (2 if args.tiny else 10)

    def save():
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=1)

    suggested = 16
    if "target_len" in only:
        report["target_len"] = suggested_target_len(s["demo"], say)
        suggested = report["target_len"]["suggested"]
        save()
    lengths = [s["long_len"] or suggested, suggested]
    main_flags = [*s["bb_flags"], *_remat_flags("full"),
                  f"--config.data.max_target_len={lengths[0]}"]
    main_setting = _setting(s["bb"], main_flags)
    main_run = None
    if "launch" in only:
        report["launch"] = {}
        for name in ("cold", "warm"):
            # The warm run also times the optimizer's update alone and traces 3 steps (after
            # the timed ones).
            flags = main_flags + (["--time_optimizer", "--profile",
                                   os.path.join(out_dir, "profile")] if name == "warm" else [])
            figures, _, error = train_step_child(s["bb"], flags, steps, cache_dir, out_dir,
                                                 f"launch_{name}", args.timeout, say)
            report["launch"][name] = {"setting": main_setting, "figures": figures,
                                      "error": error}
            save()
        main_run = report["launch"]["warm"]
    if "bb" in only:
        report["bb"] = []
        # Padded at each length and remat policy, then packed (BB's own setting) as the launch.
        grid = [[*s["bb_flags"], *_remat_flags(remat), f"--config.data.max_target_len={length}",
                 "--config.data.pack=False"]
                for length in dict.fromkeys(lengths) for remat in s["remats"]]
        for i, flags in enumerate([*grid, main_flags]):
            if flags == main_flags and main_run and main_run["figures"]:
                figures, error = main_run["figures"], None  # The warm launch measured it.
            else:
                figures, _, error = train_step_child(s["bb"], flags, steps, cache_dir, out_dir,
                                                     f"bb_{i}", args.timeout, say)
            report["bb"].append({"setting": _setting(s["bb"], flags), "figures": figures,
                                 "error": error})
            save()
    first = next((e["figures"] for e in report.get("bb", []) + [main_run or {}]
                  if e and e.get("figures")), None)
    if first:
        matmul = [name for name in first["peaks"] if "matmul" in name][0]
        report["device"] = {"kind": first["device"], "count": first["device_count"],
                            "jax": first.get("jax_version"), "matmul": matmul,
                            "matmul_flops_per_s": first["peaks"][matmul],
                            "data_sheet_peak_flops": next(
                                (v for k, v in first["peaks"].items() if "data-sheet" in k), None)}
    sections = [section for section in CHILD_SECTIONS if section in only]
    if sections:
        figures, _, error = section_child(sections, args.tiny, out_dir, args.timeout, say)
        if error:
            report["errors"][",".join(sections)] = error
        else:
            report.update(figures)
        save()
    if "bg_lg" in only:
        report["bg_lg"] = []
        for name, config in s["big"]:
            figures, _, error = train_step_child(config, s["big_flags"], s["big_steps"],
                                                 cache_dir, out_dir, name, args.timeout, say)
            report["bg_lg"].append({"setting": _setting(config, s["big_flags"]),
                                    "figures": figures, "error": error})
            save()
    report["table"] = table(report)
    save()
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true",
                        help="tiny shapes on every section (a CPU runs it in about a minute)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per training run (default 10; --tiny 2)")
    parser.add_argument("--only", help=f"comma-separated sections: {', '.join(SECTIONS)}")
    parser.add_argument("--cache_dir", help="persistent compilation cache (default: a new, "
                        "empty one, so that the first launch is cold)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per child process")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # Sections, in a child process.
    args = parser.parse_args(argv)
    if args.only:
        unknown = set(args.only.split(",")) - set(SECTIONS)
        if unknown:
            parser.error(f"--only: unknown section(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(SECTIONS)}")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps={args.steps} must be at least 1")
    if args.child:
        functions = {"decoding": decoding_figures, "attention": attention_figures}
        figures = {section: functions[section](args.tiny) for section in args.child.split(",")}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)
        return 0

    def say(line):
        print(line, file=sys.stderr, flush=True)

    start = time.perf_counter()
    report = build_report(args, say)
    say(f"report done in {time.perf_counter() - start:.0f} s")
    print(report["table"])
    print()
    print(json.dumps({k: v for k, v in report.items() if k != "table"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
