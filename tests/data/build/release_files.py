"""COCO-35L and CC3M-35L release folders in miniature, in the exact layouts, for the build tests."""

import bz2
import io
import json
import tarfile

import numpy as np
from PIL import Image

MT_LANGS = ("es", "hi", "zh")


def jpeg(value, size=(12, 10)):
    """A small JPEG of one grey `value`, `size` = (width, height)."""
    buffer = io.BytesIO()
    Image.fromarray(np.full((size[1], size[0], 3), value, np.uint8)).save(buffer, "JPEG")
    return buffer.getvalue()


def _mt_line(image_id, lang, english):
    return json.dumps({"image_id": image_id, "src_lang": "en", "trg_lang": lang,
                       "caption_tokenized": english, "translation_tokenized": f"{lang}: {english}",
                       "backtranslation_tokenized": english}, ensure_ascii=False)


def coco35l(root, images=(5, 6, 7), splits=("train", "restval", "val"), size=(12, 10)):
    """dataset_coco.json, the JPEGs and coco_mt_{train,dev}.jsonl.bz2 for `images` (cocoids).

    Image i has two English captions "shape number <cocoid>", "another shape
    <cocoid>" and their translations "<lang>: <English>" in es, hi, zh."""
    root.mkdir()
    karpathy, mt = [], {"train": [], "dev": []}
    for i, (cocoid, split) in enumerate(zip(images, splits, strict=True)):
        folder = "train2014" if split == "train" else "val2014"
        name = f"COCO_{folder}_{cocoid:012d}.jpg"
        (root / folder).mkdir(exist_ok=True)
        (root / folder / name).write_bytes(jpeg(20 * i % 256, size))
        english = [f"shape number {cocoid}", f"another shape {cocoid}"]
        karpathy.append({"filepath": folder, "filename": name, "cocoid": cocoid, "split": split,
                         "imgid": i, "sentids": [0, 1],
                         "sentences": [{"tokens": e.split(), "raw": e, "imgid": i, "sentid": n}
                                       for n, e in enumerate(english)]})
        for lang in MT_LANGS:
            for n, e in enumerate(english):
                mt["dev" if split == "val" else "train"].append(_mt_line(f"{cocoid}_{n}", lang, e))
    (root / "dataset_coco.json").write_text(json.dumps({"images": karpathy, "dataset": "coco"}))
    for split, lines in mt.items():
        with bz2.open(root / f"coco_mt_{split}.jsonl.bz2", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return root


def cc3m35l(root, *, shards):
    """cc3m_mt_{train,dev}.jsonl.bz2 and the images (tar shards or files); train image 3 missing.

    Record k's English caption is "picture <k>", its translations "<lang> picture <k>"."""
    root.mkdir()
    for split, keys in (("train", range(0, 5)), ("dev", range(0, 2))):
        lines = []
        for key in keys:
            for lang in MT_LANGS:
                lines.append(json.dumps({
                    "image_id": str(key), "src_lang": "en", "trg_lang": lang,
                    "caption_tokenized": f"picture {key}",
                    "translation_tokenized": f"{lang} picture {key}",
                    "backtranslation_tokenized": f"picture {key}"}))
        with bz2.open(root / f"cc3m_mt_{split}.jsonl.bz2", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        folder = root / split
        folder.mkdir()
        # Image 3 of train failed to download, as CC3M URLs do.
        present = [k for k in keys if not (split == "train" and k == 3)]
        if shards:
            for shard, chunk in enumerate((present[:2], present[2:])):
                with tarfile.open(folder / f"{shard:05d}.tar", "w") as tar:
                    for key in chunk:
                        for ext, data in ((".jpg", jpeg(10 * key)),
                                          (".txt", f"picture {key}".encode()),
                                          (".json", json.dumps({"key": f"{key:09d}"}).encode())):
                            info = tarfile.TarInfo(f"{key:09d}{ext}")
                            info.size = len(data)
                            tar.addfile(info, io.BytesIO(data))
        else:
            (folder / "00000").mkdir()
            for key in present:
                (folder / "00000" / f"{key:09d}.jpg").write_bytes(jpeg(10 * key))
    return root
