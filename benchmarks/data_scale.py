"""The data path at the paper's scale: build time, disk, memory and start-up on synthetic releases.

    python -m benchmarks.data_scale --dataset cc3m35l --fraction 1.0 --images tiny \
        --workers 2,16 --out /tmp/scale_cc3m_text    # CC3M-35L's 112.8 M translation lines
    python -m benchmarks.data_scale --dataset coco35l --fraction 0.05 --out /tmp/scale_coco
    python -m benchmarks.data_scale --dataset cc3m35l --fraction 0.003 --out /tmp/scale_cc3m

1. Writes (once; a folder with the same parameters is reused) a synthetic release at
   `fraction` of full size (synthetic_releases.py: the exact layouts of docs/datasets.md;
   `--images tiny` writes 8x8 JPEGs, to measure the text side at full size).
2. Builds them with `python -m tools.build_data` in a subprocess and reports its wall
   time, the time of each stage, peak memory (the sum over the build's processes
   of their proportional set size, polled 5 times a second, and the largest
   single process's resident set, each against 2 GB), and the disk of the images
   (and its ratio to the JPEG bytes) and of the caption tables. With `--workers
   2,16` the caption tables (the stage whose memory grows with the captions and
   the cores) are built again with 16 worker processes from the first build's
   spills (the images kept, the text not read again): the scheduler's memory
   budget, not the cores, bounds what runs at once.
3. Measures the time from a fresh process to the first training batch (batch
   256 at 224 px, every built language), and how long the COCO-dev evaluation
   set takes to load (COCO-35L).
4. Extrapolates the build to the full COCO-35L and CC3M-35L on 2 and 16 cores
   from the measured per-image, per-line and per-caption costs, and its disk per
   JPEG byte (the images' ratio plus the caption tables' bytes per image over a
   JPEG's: with `--images tiny`, a JPEG as `--images realistic` writes them).

benchmarks/input_pipeline.py measures the training input's examples/s. The machine may be
shared: the load average is printed with every figure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import synthetic_releases  # noqa: E402
from data import languages  # noqa: E402
from data.build import layout  # noqa: E402
from tools import cli as tool_cli  # noqa: E402


# ---------------------------------------------------------------- measure ----
def _tree(pid):
    """pid and its descendants (Linux /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _memory(pid):
    """(proportional set size, resident set size) of one process in bytes, or (0, 0)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["Pss"].split()[0]) * 1024, int(fields["Rss"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 0, 0


class PeakMemory:
    """Polls a process tree's memory in a thread: the peak sum of PSS and the peak single RSS."""

    def __init__(self, pid, every=0.2):
        self.pid, self.every = pid, every
        self.tree_pss = self.max_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self):
        while not self._stop.is_set():
            sizes = [_memory(p) for p in _tree(self.pid)]
            self.tree_pss = max(self.tree_pss, sum(s[0] for s in sizes))
            self.max_rss = max([self.max_rss, *(s[1] for s in sizes)])
            self._stop.wait(self.every)

    def stop(self):
        self._stop.set()
        self._thread.join()


def _du(path):
    total = 0
    for root, _, names in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, name)) for name in names)
    return total


def _gb(n):
    return f"{n / 1e9:.2f} GB"


def _load():
    with open("/proc/loadavg", encoding="utf-8") as f:
        return f"load {f.read().split()[0]} on {os.cpu_count()} cores"


_BUILD = """
import json, os, sys, time
from data import build
from data.build import builder, image_shards
start, cpu = time.time(), time.process_time()
if {tables_only}:  # The caption-table stage alone, from the spills the first build kept.
    release = build.release({dataset!r}, {manual!r})
    plan = builder._plan(release, {data_dir!r}, {langs!r},
                         image_shards.ImageOptions(max_side={max_side}), ("train", "dev"))
    for name in os.listdir({spills!r}):
        os.link(os.path.join({spills!r}, name), os.path.join(plan.state_dir, name))
    table_workers = builder._table_workers(plan, {workers})  # As build() does.
    pool = builder._pool(table_workers)
    tables, timing = builder._caption_tables(pool, plan, table_workers,
                                            builder.Progress(release.title, 0, 0))
    pool.close()
    pool.join()
    builder._finish_captions(plan, tables)
    builder._remove_state(plan)
    summary = {{**builder._summary({data_dir!r}, {dataset!r}, []), "timing": timing}}
else:
    remove_state = builder._remove_state

    def keep_spills(plan):  # Hard links: the tables-only run reads them again.
        os.makedirs({spills!r}, exist_ok=True)
        for name in os.listdir(plan.state_dir):
            if name.startswith("spill-"):
                os.link(os.path.join(plan.state_dir, name), os.path.join({spills!r}, name))
        remove_state(plan)

    builder._remove_state = keep_spills
    summary = build.build_corpus({dataset!r}, manual_dir={manual!r}, data_dir={data_dir!r},
                                 langs={langs!r}, max_side={max_side}, workers={workers})
summary["wall_s"] = time.time() - start
summary["main_cpu_s"] = time.process_time() - cpu
with open({result!r}, "w") as f:
    json.dump(summary, f)
"""


def run_build(dataset, manual, data_dir, langs, max_side, workers, result, tables_only=False):
    """Builds in a subprocess: (summary, peak memory). The spills of a full build are kept
    beside `result`; `tables_only` builds the caption tables again from them."""
    spills = os.path.join(os.path.dirname(result), "spills")
    if not tables_only:
        shutil.rmtree(spills, ignore_errors=True)
    code = _BUILD.format(dataset=dataset, manual=manual, data_dir=data_dir, langs=list(langs),
                         max_side=max_side, workers=workers, result=result, spills=spills,
                         tables_only=tables_only)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=root)
    memory = PeakMemory(proc.pid)
    code = proc.wait()
    memory.stop()
    if code:
        raise SystemExit(f"error: the build failed (exit status {code})")
    with open(result, encoding="utf-8") as f:
        return json.load(f), memory


_FIRST_BATCH = """
import time
start = time.time()
from data import pipeline, tokenizer
config = dict(dataset={dataset!r}, manual_dir={manual!r}, tfds_data_dir={data_dir!r},
              langs={langs!r}, max_prompt_len=16, max_target_len=64, num_workers={workers})
batches = pipeline.train_iterator(config, tokenizer.get_vocabulary({vocab!r}),
                                  global_batch_size=256, image_size=224, seed=0)
batch = next(batches)
print(f"{{time.time() - start:.2f}}")
batches.close()
"""


def first_batch_seconds(dataset, manual, data_dir, langs, vocab, workers):
    """Seconds from a fresh Python process to its first training batch."""
    code = _FIRST_BATCH.format(dataset=dataset, manual=manual, data_dir=data_dir,
                               langs=tuple(langs), vocab=vocab, workers=workers)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    start = time.time()
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1]), time.time() - start


def report_build(args, workers, summary, memory, data_dir, inputs):
    """Prints a build's times, memory and disk; returns (image disk ratio, bytes a caption)."""
    t = summary["timing"]
    images_disk = _du(layout.images_dir(data_dir, args.dataset))
    captions_disk = _du(layout.captions_dir(data_dir, args.dataset))
    num_images = sum(summary["images"].values())
    print(f"build ({workers} workers, max_side {args.max_side}; {_load()}): "
          f"{summary['wall_s']:.1f} s; "
          + (f"text pass {t['text_s']:.1f} s for {t['lines']:,} lines" if "text_s" in t
             else "the caption tables alone (the first build's spills)")
          + (f", images done at {t['images_s']:.1f} s ({t['image_cpu_s']:.1f} CPU-s for "
             f"{num_images:,} images)" if "image_cpu_s" in t and t["image_cpu_s"] else "")
          + f", caption tables {t['tables_s']:.1f} s in {t['table_workers']} workers "
            f"({t['table_cpu_s']:.1f} CPU-s for "
            f"{t['captions']:,} captions)")
    ok = "under" if max(memory.tree_pss, memory.max_rss) < 2e9 else "OVER"
    print(f"  peak memory: {_gb(memory.tree_pss)} over all the build's processes (PSS), "
          f"{_gb(memory.max_rss)} the largest one (RSS): {ok} 2 GB")
    ratio = images_disk / inputs["jpeg_bytes"]
    # ArrayRecord pads each file to its 64 KiB blocks: half a block a table, on average, that
    # a table of the full release spreads over 100-1000 times more captions.
    tables = sum(".array_record-" in name for name in os.listdir(
        layout.captions_dir(data_dir, args.dataset)))
    per_caption = max(captions_disk - tables * (32 << 10), 0) / max(t["captions"], 1)
    print(f"  disk: images {_gb(images_disk)} = {ratio:.3f}x the JPEG bytes; caption tables "
          f"{_gb(captions_disk)} ({per_caption:.1f} B per caption, less their {tables} tables' "
          f"padding)")
    return ratio, per_caption, t


def extrapolate(args, timing, ratio, per_caption, inputs, num_images):
    """The full release's build time on 2 and 16 cores, and its disk per JPEG byte."""
    images, lines, captions = synthetic_releases.full_size(args.dataset)
    print(f"extrapolated to the full {args.dataset} ({images:,} images, {lines:,} lines, "
          f"{captions:,} captions), from this run's costs:")
    per_image = timing.get("image_cpu_s", 0) / max(num_images, 1)
    per_line = timing["text_s"] / max(timing["lines"], 1)
    per_table_caption = timing["table_cpu_s"] / max(timing["captions"], 1)
    for cores in (2, 16):
        image_s, text_s = images * per_image / cores, lines * per_line
        table_s = captions * per_table_caption / cores
        print(f"  {cores:2d} cores: images {image_s / 3600:.2f} h (in parallel with the text "
              f"pass {text_s / 3600:.2f} h), caption tables {table_s / 3600:.2f} h: "
              f"{(max(image_s, text_s) + table_s) / 3600:.2f} h")
    if args.images == "realistic":
        jpeg = inputs["jpeg_bytes"] / max(num_images, 1)
        basis = "this run's JPEGs"
    else:
        jpeg, ratio = synthetic_releases.TYPICAL_JPEG[args.dataset], 1.0
        basis = f"{jpeg / 1e3:.0f} KB JPEGs, as --images realistic writes, stored as they are"
    added = captions / images * per_caption / jpeg
    print(f"  disk: {ratio + added:.3f}x the JPEG bytes (images {ratio:.3f}x + caption "
          f"tables {added:.3f}x: {captions / images:.0f} captions an image at "
          f"{per_caption:.1f} B, {basis}): images {images * jpeg * ratio / 1e12:.3f} TB, "
          f"caption tables {captions * per_caption / 1e9:.1f} GB")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=layout.DATASETS, default="coco35l")
    parser.add_argument("--fraction", type=float, default=0.05,
                        help="of the full release's images and translation lines")
    parser.add_argument("--images", choices=("realistic", "tiny"), default="realistic")
    parser.add_argument("--out", required=True, help="folder for the inputs and the build")
    parser.add_argument("--workers", type=tool_cli.counts(1), default=[os.cpu_count()],
                        help="the build's worker processes; a list (2,16) builds the caption "
                             "tables again with each further count, the images kept")
    parser.add_argument("--max_side", type=int, default=0, help="the build's --max_side")
    args = parser.parse_args(argv)
    out = os.path.abspath(args.out)
    worker_counts = args.workers
    print(f"{args.dataset} at fraction {args.fraction} ({args.images} images), {_load()}")
    manual, inputs = synthetic_releases.write_inputs(out, args.dataset, args.fraction,
                                                     args.images, os.cpu_count())
    print(f"inputs: {inputs['lines']:,} translation lines, JPEGs {_gb(inputs['jpeg_bytes'])} "
          f"(written in {inputs['seconds']:.0f} s; reused if present)")

    # "tfds" beside "manual" is where the COCO-dev evaluation looks for the build.
    data_dir = os.path.join(out, "tfds" if not args.max_side else f"tfds_side{args.max_side}")
    langs = languages.TRAIN_35L_LANGS
    shutil.rmtree(data_dir, ignore_errors=True)
    for i, workers in enumerate(worker_counts):
        if i:  # The images stay; the caption tables are built again.
            shutil.rmtree(layout.captions_dir(data_dir, args.dataset))
        summary, memory = run_build(args.dataset, manual, data_dir, langs, args.max_side,
                                    workers, os.path.join(out, "build_summary.json"),
                                    tables_only=bool(i))
        ratio, per_caption, timing = report_build(args, workers, summary, memory, data_dir,
                                                  inputs)
        if not i:
            first_timing = timing
    shutil.rmtree(os.path.join(out, "spills"), ignore_errors=True)
    num_images = sum(summary["images"].values())

    vocab = synthetic_releases.write_vocab(out, manual)
    inside, outside = first_batch_seconds(args.dataset, manual, data_dir, langs, vocab,
                                          min(2, os.cpu_count()))
    print(f"first training batch (256 x 224 px, {len(langs)} languages, 2 workers): "
          f"{inside:.1f} s after the interpreter started ({outside:.1f} s with it); {_load()}")
    if args.dataset == "coco35l":
        from data import eval_sets, tokenizer
        from data.releases import coco35l

        start = time.time()
        dev = eval_sets.load_coco_dev(manual, languages.CORE_LANGS,
                                      tokenizer.get_vocabulary(vocab), image_size=224,
                                      prompt_template="<2{lang}>", max_prompt_len=16)
        seconds = time.time() - start
        start = time.time()
        coco35l.read_split(manual, "dev", languages.CORE_LANGS)
        print(f"COCO-dev evaluation set ({len(dev.images):,} images, 4 languages): "
              f"{seconds:.1f} s{' from the build' if not args.max_side else ''} (reading its "
              f"captions from the release files instead: {time.time() - start:.1f} s)")
    extrapolate(args, first_timing, ratio, per_caption, inputs, num_images)


if __name__ == "__main__":
    main()
