"""Input pipeline speed: one core's decoding, the Grain pipeline, and main's pipeline in one run.

    python -m benchmarks.input_pipeline [--train_images 1024] [--batches 8] [--rounds 3] \
        [--work_dir DIR] [--baseline PATH|REF] [--workers 1,2,16]

Batch 256 at 224 px, all 35 languages, on a synthetic COCO-35L release with released-size
JPEGs (640x480, ~150 KB: synthetic_releases.py), built once with the build of this tree:

1. One core: the same decode + resize the pipeline does (data/images.decode_pixels, at a
   reduced DCT scale when that still leaves 224 px), best of 3 passes over 200 JPEGs, in a
   subprocess with a worker's imports (SINGLE_CORE says why), the mean of 8 such processes
   with its standard error (each decodes at one of two speeds: main() says why); no
   pipeline. The ratio to two cores is also given at one core's rate +- that error.
2. The Grain pipeline (data/pipeline/) with 1 and 2 worker processes: examples/s, examples
   per CPU-second of a worker, and the trainer's own CPU per example.
3. With `--baseline`, the pipeline of another tree (e.g. main before the move to Grain: its
   own worker pool and prefetch thread): a folder holding it, or a git ref of this repository
   exported by `git archive` into a temporary folder; built there with its own build from
   the same release files, measured the same way, in a subprocess.
4. The prediction for 16 and 64 cores: workers x one worker's examples per CPU-second x
   the efficiency per CPU-second measured from 1 to 2 workers, capped by what the trainer's
   own CPU per example allows (it takes every batch in one process); `--workers 1,2,16`
   measures 16 too, on a machine with that many cores, against the prediction.

2 and 3 take turns for `--rounds` rounds (Grain first in odd rounds, last in even ones, so
that a drift of the machine's speed falls on both); each figure is the median of its rounds,
and the ratio of the two pipelines is given round by round. Every figure comes with the load
average (/proc/loadavg): on a shared machine compare only the figures of one run.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import synthetic_releases  # noqa: E402
from data import languages  # noqa: E402
from tools import cli as tool_cli  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH, SIZE = 256, 224


def load():
    with open("/proc/loadavg", encoding="utf-8") as f:
        return f"load {' '.join(f.read().split()[:3])}"


# One core's decode + resize, in a process that imports what a worker does: JAX's import
# leaves glibc's malloc reusing freed buffers instead of unmapping them (a raised mmap
# threshold), which makes decoding 12-18% faster than in a bare process; this process,
# depending on what it had freed before, measured anywhere from 388 to 477 images/s.
SINGLE_CORE = """
import json, sys, time
from data import images, pipeline  # noqa: F401 (a worker's imports)
args = json.loads(sys.argv[1])
jpegs = [open(path, "rb").read() for path in args["paths"]]
best = 0.0
for _ in range(3):
    cpu = time.thread_time()
    for data in jpegs:
        images.decode_pixels(data, args["size"])
    best = max(best, len(jpegs) / (time.thread_time() - cpu))
print(json.dumps(best))
"""


# The measurement, the same for both pipelines, run in a subprocess in each tree: warm up,
# then time the batches; `make(num_workers)` and `pids(iterator)` are what differ. Its
# arguments come as JSON in argv[1]; it prints its result as JSON.
MEASURE = """
import json, os, sys, time
args = json.loads(sys.argv[1])
config = dict(dataset="coco35l", manual_dir=args["manual"], tfds_data_dir=args["data_dir"],
              langs=args["langs"], max_prompt_len=16, max_target_len=64)

def cpu(pids):
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total

def measure(make, pids, workers):
    iterator = make(workers)
    for _ in range(workers + 1):
        next(iterator)
    worker_cpu, own = cpu(pids(iterator)), time.process_time()
    start = time.perf_counter()
    for _ in range(args["batches"]):
        next(iterator)
    seconds = time.perf_counter() - start
    worker_cpu, own = cpu(pids(iterator)) - worker_cpu, time.process_time() - own
    iterator.close()
    count = args["batches"] * args["batch"]
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return {"rate": count / seconds, "worker_cpu": worker_cpu / count,
            "own_cpu": own / count, "load": load}
"""

NEW = MEASURE + """
from data import pipeline, tokenizer
vocab = tokenizer.get_vocabulary(args["vocab"])

def make(workers):
    return pipeline.train_iterator(dict(config, num_workers=workers), vocab,
                                   global_batch_size=args["batch"], image_size=args["size"],
                                   seed=0)

print(json.dumps([measure(make, lambda it: [w.pid for w in it.workers], w)
                  for w in args["workers"]]))
"""

OLD = MEASURE + """
from data import build, pipeline
build.build_corpus("coco35l", manual_dir=args["manual"], data_dir=args["data_dir"],
                   langs=args["langs"])
with open(args["vocab"], "rb") as f:
    encoder = pipeline.SentencePieceEncoder(f.read())

def make(workers):
    return pipeline.train_iterator(dict(config, num_workers=workers), encoder,
                                   global_batch_size=args["batch"], image_size=args["size"],
                                   seed=0)

print(json.dumps([measure(make, lambda it: it.pids, w) for w in args["workers"]]))
"""


def run(code, cwd, **kwargs):
    """The JSON result a measuring script prints (its last line), run in the tree `cwd`."""
    path = os.pathsep.join(filter(None, [cwd, os.environ.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", code, json.dumps(kwargs)], cwd=cwd,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
    if out.returncode:
        sys.exit(f"error: the measurement in {cwd} failed (exit status {out.returncode}):\n"
                 f"{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def baseline_tree(baseline, folder):
    """The tree of `--baseline`: a folder as it is, or a git ref of this repository exported
    into `folder` (its files only)."""
    if os.path.isdir(baseline):
        return os.path.abspath(baseline)
    archive = subprocess.run(["git", "-C", ROOT, "archive", baseline], capture_output=True)
    if archive.returncode:
        sys.exit(f"error: --baseline {baseline}: neither a folder nor a git ref of {ROOT} "
                 f"({archive.stderr.decode().strip()})")
    archive = archive.stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    return folder


def medians(rounds):
    """Per worker count, the median of each figure over the rounds (the last round's load)."""
    return [{**by_round[-1], **{key: statistics.median(r[key] for r in by_round)
                                for key in ("rate", "worker_cpu", "own_cpu")}}
            for by_round in zip(*rounds, strict=True)]


def report(label, worker_counts, rates):
    for workers, r in zip(worker_counts, rates, strict=True):
        print(f"   {label}, {workers} worker{'s' if workers > 1 else ' '}: {r['rate']:6.0f} "
              f"examples/s; {1 / r['worker_cpu']:4.0f} examples per CPU-second of the "
              f"workers; the trainer {r['own_cpu'] * 1e6:4.0f} us of CPU per example "
              f"(load {r['load']})")


def predict(rates, per_core, worker_counts):
    """Examples/s predicted for 16 and 64 cores (a worker each), with its basis, and against
    what was measured with more workers."""
    per_worker = 1 / rates[0]["worker_cpu"]
    efficiency = min(rates[0]["worker_cpu"] / rates[1]["worker_cpu"], 1.0)
    cap = 1 / max(rates[1]["own_cpu"], 1e-9)

    def predicted(cores):
        return min(cores * per_worker * efficiency, cap)

    print(f"4. predicted for one training process with a worker per free core: workers x "
          f"{per_worker:.0f} examples per CPU-second of one worker ({per_worker / per_core:.2f}"
          f" of the single-core decode rate) x {efficiency:.2f} (per CPU-second, 2 workers "
          f"vs 1), capped at {cap:,.0f}/s by the trainer's own CPU per example:")
    for cores in (16, 64):
        print(f"   {cores} cores: ~{predicted(cores):,.0f} examples/s")
    for workers, r in zip(worker_counts[2:], rates[2:], strict=True):
        print(f"   measured with {workers} workers: {r['rate']:,.0f} examples/s, "
              f"{r['rate'] / predicted(workers):.2f}x the prediction for {workers}")


def main(argv=None):
    parser = tool_cli.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train_images", type=int, default=1024,
                        help="training images of the synthetic COCO-35L")
    parser.add_argument("--batches", type=tool_cli.count(4), default=8,
                        help="batches of 256 timed a run (4 or more: more than the workers "
                             "make ahead)")
    parser.add_argument("--rounds", type=tool_cli.count(1), default=3,
                        help="rounds of the two pipelines' measurements (the medians are shown)")
    parser.add_argument("--work_dir", default=None,
                        help="keep the release and the builds here (reused when present)")
    parser.add_argument("--baseline", default=None,
                        help="a tree whose pipeline is measured beside this one: its folder, or "
                             "a git ref of this repository (default: none)")
    parser.add_argument("--workers", type=tool_cli.counts(1), default=[1, 2],
                        help="worker counts measured: 1, 2, then any more (say 1,2,16)")
    args = parser.parse_args(argv)
    worker_counts, rounds = args.workers, args.rounds
    if worker_counts[:2] != [1, 2]:
        parser.error(f"--workers {','.join(map(str, worker_counts))}: starts with 1,2 (the "
                     f"prediction's basis)")
    work = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="input_pipeline_"))
    fraction = args.train_images / (synthetic_releases.COCO_SPLITS["train"] +
                                    synthetic_releases.COCO_SPLITS["restval"])
    manual, inputs = synthetic_releases.write_inputs(work, "coco35l", fraction, "realistic",
                                             os.cpu_count())
    vocab = synthetic_releases.write_vocab(work, manual)
    langs = languages.TRAIN_35L_LANGS
    train = os.path.join(manual, "train2014")
    paths = sorted(os.path.join(train, name) for name in os.listdir(train))[:200]
    # jpeg_bytes counts every image (training: train2014 and restval from val2014; dev).
    num_jpegs = sum(len(os.listdir(os.path.join(manual, f))) for f in ("train2014", "val2014"))
    print(f"Batch {BATCH} at {SIZE} px, {len(langs)} languages, {args.train_images} training "
          f"images of ~{inputs['jpeg_bytes'] / 1e3 / max(num_jpegs, 1):.0f} KB "
          f"(640x480), {os.cpu_count()} cores; {load()}")
    # A process decodes at one of two speeds, ~5% apart, over all its passes (438-458 or
    # 471-479 images/s here, about as many of each), whatever ASLR, PYTHONHASHSEED, malloc's
    # thresholds, glibc's huge pages, Pillow's block cache or the core it is pinned to (each
    # tried). The median of 3 was one or the other by chance; the mean of 8 is one core's
    # expected rate, with its standard error (~1% with two speeds 5% apart).
    rates = sorted(run(SINGLE_CORE, ROOT, paths=paths, size=SIZE) for _ in range(8))
    per_core = statistics.mean(rates)
    error = statistics.stdev(rates) / len(rates) ** 0.5
    print(f"1. one core, decode + resize to {SIZE} px (data/images.decode_pixels, no pipeline):"
          f" {per_core:.0f} +- {error:.0f} images/s, the mean of {len(rates)} processes and "
          f"its standard error ({', '.join(f'{r:.0f}' for r in rates)}; {load()})")

    from data import build

    data_dir = os.path.join(work, "built")
    build.build_corpus("coco35l", manual_dir=manual, data_dir=data_dir, langs=langs)
    params = dict(manual=manual, vocab=vocab, langs=langs, batch=BATCH, size=SIZE,
                  batches=args.batches, workers=worker_counts)
    compare = bool(args.baseline)
    trees = {"Grain": (NEW, ROOT, data_dir)}  # label: (measuring script, tree, its build)
    with tempfile.TemporaryDirectory() as folder:
        if compare:
            name = os.path.basename(os.path.normpath(args.baseline))
            trees[args.baseline] = (OLD, baseline_tree(args.baseline, folder),
                                    os.path.join(work, f"built_{name}"))
        results = {label: [] for label in trees}
        for round_index in range(rounds):
            for label in list(trees)[::-1] if round_index % 2 else list(trees):
                code, tree, built = trees[label]
                results[label].append(run(code, tree, data_dir=built, **params))
    of_rounds = f"median of {rounds} round{'s' * (rounds > 1)}"
    new = medians(results["Grain"])
    print(f"2. the Grain pipeline (data/pipeline/), {of_rounds}:")
    report("Grain", worker_counts, new)
    if compare:
        print(f"3. the pipeline of {args.baseline} (its own build of the same files), "
              f"{of_rounds}:")
        report(args.baseline, worker_counts, medians(results[args.baseline]))
        ratios = [n[1]["rate"] / o[1]["rate"]
                  for n, o in zip(results["Grain"], results[args.baseline], strict=True)]
        print(f"   2 workers: Grain {statistics.median(ratios):.2f}x {args.baseline}'s "
              f"examples/s, the median of the rounds' ratios "
              f"({', '.join(f'{r:.2f}' for r in ratios)}; goal: at least 1.0x)")
    low, high = (new[1]["rate"] / (2 * (per_core + e)) for e in (error, -error))
    print(f"   2 workers: Grain {new[1]['rate'] / (2 * per_core):.2f}x two cores' decode rate "
          f"({low:.2f}-{high:.2f}x within one standard error of one core's; goal: at least "
          f"0.9x)")
    predict(new, per_core, worker_counts)
    print(f"({load()} at the end)")


if __name__ == "__main__":
    main()
