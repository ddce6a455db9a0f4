"""Synthetic COCO-35L and CC3M-35L releases in the exact layouts of docs/datasets.md.

`write_inputs(out, dataset, fraction, images, workers)` writes (once: a folder with the same
parameters is reused) a release at `fraction` of full size: COCO-35L: Karpathy's
`dataset_coco.json` (123,287 images x 5 sentences at 1.0), COCO 2014 JPEGs (640x480,
~150 KB, photo-like detail), `coco_mt_train.jsonl.bz2` (19,258,790 lines at 1.0) and
`coco_mt_dev.jsonl.bz2` (850,000); CC3M-35L: img2dataset tar shards (10,000 records each,
512x384 JPEGs of ~73 KB, .txt and .json beside each, 10% of the records missing as dead
URLs) and `cc3m_mt_{train,dev}.jsonl.bz2` (34 lines per record). Captions are random words
of each language's script, about as long as the real ones. Images "tiny" are 8x8 JPEGs, to
measure the text side at full size. Used by data_scale.py and input_pipeline.py.
"""

import bz2
import concurrent.futures
import io
import json
import os
import sys
import tarfile
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import files  # noqa: E402
from data import languages  # noqa: E402

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
    from tools import demo

    path = os.path.join(out, "spm", "scale.model")
    if not os.path.exists(path):
        texts = [s for lang in ("en", *MT_LANGS) for s in _pool(lang)[:300]]
        demo.train_sentencepiece(texts, path[:-len(".model")], 4000)
    return path


def full_size(dataset):
    """(images, translation lines, captions of all languages) of the full release."""
    if dataset == "coco35l":
        images = COCO_SPLITS["train"] + COCO_SPLITS["restval"] + COCO_SPLITS["val"]
        return images, images * COCO_SENTENCES * len(MT_LANGS), \
            images * COCO_SENTENCES * (1 + len(MT_LANGS))
    records = sum(CC3M_RECORDS.values())
    return round(records * (1 - CC3M_MISSING)), records * len(MT_LANGS), \
        round(records * (1 - CC3M_MISSING)) * (1 + len(MT_LANGS))
