"""The data path at the paper's scale: build time, disk, memory and start-up on synthetic releases.

    python -m benchmarks.data_scale --dataset cc3m35l --fraction 1.0 --images tiny \
        --workers 2,16 --out /tmp/scale_cc3m_text    # CC3M-35L's 112.8 M translation lines
    python -m benchmarks.data_scale --dataset coco35l --fraction 0.05 --out /tmp/scale_coco
    python -m benchmarks.data_scale --dataset cc3m35l --fraction 0.003 --out /tmp/scale_cc3m

1. Writes (once; a folder with the same parameters is reused) synthetic release
   files in the exact layouts of docs/datasets.md at `fraction` of full size:
   COCO-35L: Karpathy `dataset_coco.json` (123,287 images x 5 sentences at 1.0),
   COCO 2014 JPEGs (640x480, ~150 KB, photo-like detail), `coco_mt_train.jsonl.bz2`
   (19,258,790 lines at 1.0) and `coco_mt_dev.jsonl.bz2` (850,000); CC3M-35L:
   img2dataset tar shards (10,000 records each, 512x384 JPEGs of ~73 KB, .txt
   and .json beside each, 10% of the records missing as dead URLs) and
   `cc3m_mt_{train,dev}.jsonl.bz2` (34 lines per record). Captions are random
   words of each language's script, about as long as the real ones. `--images
   tiny` writes 8x8 JPEGs instead, to measure the text side at full size.
2. Builds them with `python -m data.build` in a subprocess and reports its wall
   time, the time of each stage, peak memory (the sum over the build's processes
   of their proportional set size, polled 5 times a second, and the largest
   single process's resident set, each against 2 GB), and the disk of the images
   (and its ratio to the JPEG bytes) and of the caption tables. With `--workers
   2,16` the caption tables (the stage whose memory grows with the captions) are
   built again with 16 worker processes, the images kept: the scheduler's memory
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
import bz2
import concurrent.futures
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import files  # noqa: E402
from data import languages  # noqa: E402
from data.build import layout  # noqa: E402
from evaluation import cli  # noqa: E402

# Full-size counts. COCO: Karpathy's split of COCO 2014; CC3M: the training and
# validation TSVs.
COCO_SPLITS = {"train": 82_783, "restval": 30_504, "val": 5_000, "test": 5_000}
COCO_SENTENCES = 5
CC3M_RECORDS = {"train": 3_318_333, "dev": 15_840}
CC3M_MISSING = 0.10
MT_LANGS = tuple(lang for lang in languages.TRAIN_35L_LANGS if lang != "en")  # 34
RECORDS_PER_TAR = 10_000
# Mean bytes of the JPEGs `--images realistic` writes (measured), for `--images tiny` runs.
TYPICAL_JPEG = {"coco35l": 153_000, "cc3m35l": 73_000}
# Letters of each script for the synthetic words (scripts without spaces: one run each).
_SCRIPTS = {"ar": (0x0628, 0x064A), "fa": (0x0628, 0x064A), "bn": (0x0995, 0x09B9),
            "el": (0x03B1, 0x03C9), "he": (0x05D0, 0x05EA), "hi": (0x0915, 0x0939),
            "ja": (0x3041, 0x3096), "ko": (0xAC00, 0xAE00), "ru": (0x0430, 0x044F),
            "uk": (0x0430, 0x044F), "te": (0x0C15, 0x0C39), "th": (0x0E01, 0x0E2E),
            "zh": (0x4E00, 0x4FFF)}
_UNSPACED = ("ja", "th", "zh")


# ----------------------------------------------------------------- inputs ----
def photo_jpeg(rng, width, height, noise):
    """A JPEG (quality 90) with photo-like detail: smooth colour fields plus grain."""
    coarse = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
    base = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC),
                      np.float32)
    pixels = np.clip(base + rng.normal(0, noise, base.shape), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def tiny_jpeg(value):
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value % 256, np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _sentences(lang, count, seed):
    """`count` synthetic captions of about 10 words in the script of `lang`."""
    rng = np.random.default_rng([seed, sum(map(ord, lang))])
    low, high = _SCRIPTS.get(lang, (ord("a"), ord("z")))
    out = []
    for _ in range(count):
        words = ["".join(chr(c) for c in rng.integers(low, high + 1, rng.integers(2, 8)))
                 for _ in range(rng.integers(8, 13))]
        out.append(("" if lang in _UNSPACED else " ").join(words))
    return out


_POOLS = {}


def _pool(lang):
    if lang not in _POOLS:
        _POOLS[lang] = _sentences(lang, 4096, 0)
    return _POOLS[lang]


def _mt_chunk(args):
    """Compressed bz2 stream of the translation lines of `ids` (COCO: "cocoid_n"; CC3M: keys)."""
    ids, seed = args
    english, lines = _pool("en"), []
    for i, image_id in enumerate(ids):
        source = english[(seed + i * 7) % len(english)]
        for j, lang in enumerate(MT_LANGS):
            pool = _pool(lang)  # Letters only: nothing to escape.
            translation = pool[(seed + i * 31 + j * 977) % len(pool)]
            back = english[(seed + i + j) % len(english)]
            lines.append(f'{{"image_id": "{image_id}", "src_lang": "en", "trg_lang": "{lang}", '
                         f'"caption_tokenized": "{source}", "translation_tokenized": '
                         f'"{translation}", "backtranslation_tokenized": "{back}"}}\n')
    return bz2.compress("".join(lines).encode("utf-8"))


def write_translations(path, ids, pool, chunk=20_000):
    """coco_mt_*/cc3m_mt_*.jsonl.bz2: 34 lines per id, compressed in parallel (bz2 streams)."""
    chunks = [(ids[i:i + chunk], i) for i in range(0, len(ids), chunk)]
    with open(path + ".tmp", "wb") as f:
        for data in pool.map(_mt_chunk, chunks):
            f.write(data)
    os.replace(path + ".tmp", path)
    return len(ids) * len(MT_LANGS)


def _write_images(args):
    paths, kind, seed, size, noise = args
    rng = np.random.default_rng(seed)
    total = 0
    for i, path in enumerate(paths):
        data = tiny_jpeg(seed + i) if kind == "tiny" else photo_jpeg(rng, *size, noise)
        with open(path, "wb") as f:
            f.write(data)
        total += len(data)
    return total


def write_coco35l(root, fraction, kind, pool):
    """A synthetic COCO-35L release under `root`; returns (JPEG bytes, translation lines)."""
    os.makedirs(os.path.join(root, "train2014"), exist_ok=True)
    os.makedirs(os.path.join(root, "val2014"), exist_ok=True)
    english = _pool("en")
    images, files, cocoid = [], [], 1
    for split, count in COCO_SPLITS.items():
        for _ in range(max(1, round(count * fraction))):
            folder = "train2014" if split == "train" else "val2014"
            name = f"COCO_{folder}_{cocoid:012d}.jpg"
            sentences = [english[(cocoid * 5 + n) % len(english)].split()
                         for n in range(COCO_SENTENCES)]
            images.append({"filepath": folder, "filename": name, "cocoid": cocoid,
                           "split": split, "imgid": len(images), "sentids": [],
                           "sentences": [{"tokens": t, "raw": " ".join(t).capitalize() + ".",
                                          "imgid": len(images), "sentid": 0}
                                         for t in sentences]})
            if split != "test":
                files.append(os.path.join(root, folder, name))
            cocoid += 1
    with open(os.path.join(root, "dataset_coco.json"), "w", encoding="utf-8") as f:
        json.dump({"images": images, "dataset": "coco"}, f)
    runs = [(files[i:i + 500], kind, i, (640, 480), 18) for i in range(0, len(files), 500)]
    jpeg_bytes = sum(pool.map(_write_images, runs))
    lines = 0
    for split, members in (("train", ("train", "restval")), ("dev", ("val",))):
        ids = [f"{im['cocoid']}_{n}" for im in images if im["split"] in members
               for n in range(COCO_SENTENCES)]
        lines += write_translations(os.path.join(root, f"coco_mt_{split}.jsonl.bz2"), ids, pool)
    return jpeg_bytes, lines


def _write_tar(args):
    path, keys, kind, seed = args
    rng = np.random.default_rng(seed)
    total = 0
    with tarfile.open(path + ".tmp", "w") as tar:
        for key in keys:
            jpeg = tiny_jpeg(key) if kind == "tiny" else photo_jpeg(rng, 512, 384, 10.5)
            total += len(jpeg)
            for ext, data in ((".jpg", jpeg), (".txt", b"a synthetic caption"),
                              (".json", json.dumps({"key": f"{key:09d}"}).encode())):
                info = tarfile.TarInfo(f"{key:09d}{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    os.replace(path + ".tmp", path)
    return total


def write_cc3m35l(root, fraction, kind, pool):
    """A synthetic CC3M-35L release under `root`; returns (JPEG bytes, translation lines)."""
    jpeg_bytes = lines = 0
    for split, count in CC3M_RECORDS.items():
        keys = list(range(max(1, round(count * fraction))))
        folder = os.path.join(root, split)
        os.makedirs(folder, exist_ok=True)
        rng = np.random.default_rng(len(keys))
        present = [k for k in keys if rng.random() >= CC3M_MISSING]  # Dead URLs.
        shards = [(os.path.join(folder, f"{s:05d}.tar"),
                   [k for k in present if k // RECORDS_PER_TAR == s], kind, s)
                  for s in range(-(-len(keys) // RECORDS_PER_TAR))]
        jpeg_bytes += sum(pool.map(_write_tar, shards))
        lines += write_translations(os.path.join(root, f"cc3m_mt_{split}.jsonl.bz2"),
                                    [str(k) for k in keys], pool)
    return jpeg_bytes, lines


def write_inputs(out, dataset, fraction, kind, workers):
    """The release folder `out/manual` (reused when written with the same parameters)."""
    manual = os.path.join(out, "manual")
    stamp = os.path.join(out, "inputs.json")
    params = {"dataset": dataset, "fraction": fraction, "images": kind, "version": 2}
    if os.path.exists(stamp):
        with open(stamp, encoding="utf-8") as f:
            saved = json.load(f)
        if saved["params"] == params:
            return manual, saved
    os.makedirs(manual, exist_ok=True)
    start = time.time()
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        write = write_coco35l if dataset == "coco35l" else write_cc3m35l
        jpeg_bytes, lines = write(manual, fraction, kind, pool)
    saved = {"params": params, "jpeg_bytes": jpeg_bytes, "lines": lines,
             "seconds": time.time() - start}
    files.write_json(stamp, saved)
    return manual, saved


def write_vocab(out, manual):
    """A small SentencePiece model of the synthetic captions (the pipeline tokenises with it)."""
    from data import tokenizer

    path = os.path.join(out, "spm", "scale.model")
    if not os.path.exists(path):
        texts = [s for lang in ("en", *MT_LANGS) for s in _pool(lang)[:300]]
        tokenizer.train_sentencepiece(texts, path[:-len(".model")], 4000)
    return path


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
import json, sys, time
from data import build
start, cpu = time.time(), time.process_time()
summary = build.build_corpus({dataset!r}, manual_dir={manual!r}, data_dir={data_dir!r},
                             langs={langs!r}, max_side={max_side}, workers={workers})
summary["wall_s"] = time.time() - start
summary["main_cpu_s"] = time.process_time() - cpu
with open({result!r}, "w") as f:
    json.dump(summary, f)
"""


def run_build(dataset, manual, data_dir, langs, max_side, workers, result):
    """Builds in a subprocess: (summary, peak memory)."""
    code = _BUILD.format(dataset=dataset, manual=manual, data_dir=data_dir, langs=list(langs),
                         max_side=max_side, workers=workers, result=result)
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


def full_size(dataset):
    """(images, translation lines, captions of all languages) of the full release."""
    if dataset == "coco35l":
        images = COCO_SPLITS["train"] + COCO_SPLITS["restval"] + COCO_SPLITS["val"]
        return images, images * COCO_SENTENCES * len(MT_LANGS), \
            images * COCO_SENTENCES * (1 + len(MT_LANGS))
    records = sum(CC3M_RECORDS.values())
    return round(records * (1 - CC3M_MISSING)), records * len(MT_LANGS), \
        round(records * (1 - CC3M_MISSING)) * (1 + len(MT_LANGS))


def report_build(args, workers, summary, memory, data_dir, inputs):
    """Prints a build's times, memory and disk; returns (image disk ratio, bytes a caption)."""
    t = summary["timing"]
    images_disk = _du(layout.images_dir(data_dir, args.dataset))
    captions_disk = _du(layout.captions_dir(data_dir, args.dataset))
    num_images = sum(summary["images"].values())
    print(f"build ({workers} workers, max_side {args.max_side}; {_load()}): "
          f"{summary['wall_s']:.1f} s; text pass {t['text_s']:.1f} s for {t['lines']:,} lines"
          + (f", images done at {t['images_s']:.1f} s ({t['image_cpu_s']:.1f} CPU-s for "
             f"{num_images:,} images)" if "image_cpu_s" in t and t["image_cpu_s"] else "")
          + f", caption tables {t['tables_s']:.1f} s ({t['table_cpu_s']:.1f} CPU-s for "
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
    images, lines, captions = full_size(args.dataset)
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
        jpeg, ratio = TYPICAL_JPEG[args.dataset], 1.0
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
    parser.add_argument("--workers", type=cli.counts(1), default=[os.cpu_count()],
                        help="the build's worker processes; a list (2,16) builds the caption "
                             "tables again with each further count, the images kept")
    parser.add_argument("--max_side", type=int, default=0, help="the build's --max_side")
    args = parser.parse_args(argv)
    out = os.path.abspath(args.out)
    worker_counts = args.workers
    print(f"{args.dataset} at fraction {args.fraction} ({args.images} images), {_load()}")
    manual, inputs = write_inputs(out, args.dataset, args.fraction, args.images,
                                  os.cpu_count())
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
                                    workers, os.path.join(out, "build_summary.json"))
        ratio, per_caption, timing = report_build(args, workers, summary, memory, data_dir,
                                                  inputs)
        if not i:
            first_timing = timing
    num_images = sum(summary["images"].values())

    vocab = write_vocab(out, manual)
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
