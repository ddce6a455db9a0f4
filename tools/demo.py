"""Synthetic demo data in the real release layouts: COCO-35L, XM3600, a vocabulary.

Each image is a small JPEG of one coloured shape (size, position) on a noisy grey
background, captioned natively in en, es, hi and zh (tools/demo_captions.py): small enough
for a tiny model to learn on a CPU in minutes, read by the same readers, build and pipeline
as the real releases. Under DIR: coco35l/ (Karpathy file, train2014/ and val2014/ images,
coco_mt_{train,dev}.jsonl.bz2), xm3600/ (captions.jsonl, images/, Open Images-style label
CSVs), vectors/wiki.<lang>.align.vec, spm/demo.model, tfds/coco35l/ (the build).

Usage: python -m tools.demo --out DIR [--seed 0]
"""

import argparse
import bz2
import io
import json
import math
import os
import shutil
import time

import numpy as np
import sentencepiece as spm
from PIL import Image, ImageDraw

import errors
import files
from data import build as build_lib
from data import languages, prompts, tokenizer
from tools import demo_captions

_RGB = {"red": (215, 35, 35), "green": (35, 165, 45), "blue": (35, 65, 215),
        "yellow": (235, 205, 25)}
# Horizontal centre of each position, as a fraction of the image width.
_X_CENTRE = {"left": 0.25, "center": 0.5, "right": 0.75}
# Shape radius as a fraction of the image width: (low, high).
_RADIUS = {"big": (0.17, 0.21), "small": (0.08, 0.11)}
TRANSLATED_LANGS = ("es", "hi", "zh")
# Marks zh word boundaries in the vocabulary's training texts.
_WORD_DELIMITER = "|"


def train_sentencepiece(texts, model_prefix, vocab_size, *, user_defined_symbols=(),
                        model_type="unigram", pretokenization_delimiter=""):
    """Trains a SentencePiece model with T5 special ids, deterministically (the same texts
    give the same file); writes `<model_prefix>.model` and `.vocab` and returns the first.

    Args:
        vocab_size: including the 3 special pieces; a small corpus may yield fewer.
        user_defined_symbols: strings always kept as single pieces (the demo's prompts).
        model_type: "unigram" (as mT5) or "bpe".
        pretokenization_delimiter: a character marking word boundaries in the texts of
            unspaced scripts (zh, ja, th): pieces never cross it; encoding needs none.
    """
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise ValueError(f"no non-empty training texts for SentencePiece model {model_prefix}")
    if vocab_size <= 3:
        raise ValueError(f"vocab_size must be > 3 (the special pieces), got {vocab_size}")
    folder = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(folder, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        pad_id=tokenizer.PAD_ID, eos_id=tokenizer.EOS_ID, unk_id=tokenizer.UNK_ID, bos_id=-1,
        # Keep every character: Devanagari and Han would otherwise be UNKs.
        character_coverage=1.0,
        user_defined_symbols=list(user_defined_symbols),
        pretokenization_delimiter=pretokenization_delimiter,
        # A small corpus cannot always fill vocab_size; do not fail on it.
        hard_vocab_limit=False,
        # Determinism: no sampling of the input, one thread.
        shuffle_input_sentence=False,
        input_sentence_size=0,
        num_threads=1,
        minloglevel=2,
    )
    path = model_prefix + ".model"
    files.write_bytes(path, model.getvalue())
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    with files.replacing(model_prefix + ".vocab") as f:
        for i in range(processor.get_piece_size()):
            f.write(f"{processor.id_to_piece(i)}\t{processor.get_score(i)}\n")
    return path


def _shape_points(shape, cx, cy, r):
    """Polygon vertices of a square, triangle or five-pointed star."""
    if shape == "square":
        h = r * 0.85
        return [(cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h), (cx - h, cy + h)]
    if shape == "triangle":
        return [(cx + r * math.cos(a), cy + r * math.sin(a))
                for a in (-math.pi / 2, math.pi / 6, 5 * math.pi / 6)]
    if shape == "star":
        points = []
        for i in range(10):
            radius = r if i % 2 == 0 else r * 0.45
            a = -math.pi / 2 + i * math.pi / 5
            points.append((cx + radius * math.cos(a), cy + radius * math.sin(a)))
        return points
    raise ValueError(f"unknown shape {shape!r}")


def render(scene, rng, size=64):
    """Draws `scene` as a [size, size, 3] uint8 image with random jitter and noise."""
    grey = int(rng.integers(185, 240))
    canvas = Image.new("RGB", (size, size), (grey, grey, grey))
    draw = ImageDraw.Draw(canvas)
    r = rng.uniform(*_RADIUS[scene.size]) * size
    cx = (_X_CENTRE[scene.position] + rng.uniform(-0.05, 0.05)) * size
    cy = size / 2 + rng.uniform(-1, 1) * (size / 2 - r - 2)
    colour = tuple(int(np.clip(c + rng.integers(-20, 21), 0, 255)) for c in _RGB[scene.colour])
    if scene.shape == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour)
    else:
        draw.polygon(_shape_points(scene.shape, cx, cy, r), fill=colour)
    pixels = np.asarray(canvas, dtype=np.float32)
    pixels += rng.normal(0.0, 6.0, pixels.shape)
    return np.clip(pixels, 0, 255).astype(np.uint8)


def _save_jpeg(pixels, path):
    Image.fromarray(pixels).save(path, format="JPEG", quality=90)


def _random_scenes(rng, n):
    scenes = demo_captions.all_scenes()
    return [scenes[i] for i in rng.integers(0, len(scenes), size=n)]


def _write_jsonl_bz2(path, rows):
    with files.replacing(path, "wb") as raw, bz2.open(raw, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _write_coco35l(root, rng, num_train, num_restval, num_val, num_test, image_size):
    """Writes the Karpathy file, the images and the translation files; returns train texts."""
    splits = (["train"] * num_train + ["restval"] * num_restval + ["val"] * num_val
              + ["test"] * num_test)
    cocoids = rng.choice(np.arange(1, 600_000), size=len(splits), replace=False)
    scenes = _random_scenes(rng, len(splits))
    for folder in ("train2014", "val2014"):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    images, mt_rows, train_texts = [], {"train": [], "dev": []}, []
    sentid = 0
    for imgid, (split, cocoid, scene) in enumerate(zip(splits, cocoids, scenes, strict=True)):
        cocoid = int(cocoid)
        # Karpathy's restval, val and test images all come from COCO's val2014.
        folder = "train2014" if split == "train" else "val2014"
        filename = f"COCO_{folder}_{cocoid:012d}.jpg"
        _save_jpeg(render(scene, rng, image_size), os.path.join(root, folder, filename))
        english = demo_captions.captions(scene, "en")
        sentences = []
        for raw, tokenized in english:
            sentences.append({"tokens": tokenized.split(), "raw": raw.capitalize() + ".",
                              "imgid": imgid, "sentid": sentid})
            sentid += 1
        images.append({"filepath": folder, "sentids": [s["sentid"] for s in sentences],
                       "filename": filename, "imgid": imgid, "split": split,
                       "sentences": sentences, "cocoid": cocoid})
        mt_split = {"train": "train", "restval": "train", "val": "dev"}.get(split)
        if mt_split is None:
            continue
        if mt_split == "train":
            train_texts.extend(tokenized for _, tokenized in english)
        for lang in TRANSLATED_LANGS:
            for n, (raw, tokenized) in enumerate(demo_captions.captions(scene, lang)):
                # Translations of unspaced scripts come unspaced, as MT writes them.
                translation = raw if lang == "zh" else tokenized
                mt_rows[mt_split].append({
                    "image_id": f"{cocoid}_{n}", "src_lang": "en", "trg_lang": lang,
                    "caption_tokenized": english[n][1],
                    "translation_tokenized": translation,
                    "backtranslation_tokenized": english[n][1]})
                if mt_split == "train":
                    # Word boundaries for the vocabulary only (see generate()).
                    train_texts.append(tokenized.replace(" ", _WORD_DELIMITER)
                                       if lang == "zh" else translation)
    with files.replacing(os.path.join(root, "dataset_coco.json")) as f:
        json.dump({"images": images, "dataset": "coco"}, f)
    _write_jsonl_bz2(os.path.join(root, "coco_mt_train.jsonl.bz2"), mt_rows["train"])
    _write_jsonl_bz2(os.path.join(root, "coco_mt_dev.jsonl.bz2"), mt_rows["dev"])
    return train_texts


def _write_xm3600(root, rng, num_images, image_size):
    """Writes the held-out split; returns [(image key, scene)] in file order."""
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    scenes = _random_scenes(rng, num_images)
    keys = set()
    written = []
    with files.replacing(os.path.join(root, "captions.jsonl")) as f:
        for i, scene in enumerate(scenes):
            key = "".join(f"{b:02x}" for b in rng.integers(0, 256, size=8))
            while key in keys:
                key = "".join(f"{b:02x}" for b in rng.integers(0, 256, size=8))
            keys.add(key)
            written.append((key, scene))
            _save_jpeg(render(scene, rng, image_size), os.path.join(root, "images", f"{key}.jpg"))
            row = {"image/key": key,
                   "image/locale": demo_captions.DEMO_LANGS[i % len(demo_captions.DEMO_LANGS)]}
            for lang in demo_captions.DEMO_LANGS:
                refs = demo_captions.captions(scene, lang)
                raws = [raw[:1].upper() + raw[1:] for raw, _ in refs]
                tokenized = [tok[:1].upper() + tok[1:] for _, tok in refs]
                row[lang] = {"caption": raws, "caption/tokenized": tokenized,
                             "caption/tokenized/lowercase": [t.lower() for t in tokenized]}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return written


# --- VIFIDEL inputs: Open Images-style labels and aligned word vectors -----------------------

# Synthetic MIDs (Open Images' are /m/ + a Freebase id) and the display names of the labels.
_LABELS = {name: f"/m/demo_{name}" for name in (*demo_captions.COLOURS,
                                                 *demo_captions.SHAPES)}
# The words of each scene attribute in each language's captions: their vectors share one
# direction up to small noise, as aligned vectors of translations do. Every other word of the
# captions gets a direction of its own.
_LEXICON = {
    "red": {"en": ("red",), "es": ("rojo", "roja"), "hi": ("लाल",), "zh": ("红色",)},
    "green": {"en": ("green",), "es": ("verde",), "hi": ("हरा", "हरी", "हरे"),
              "zh": ("绿色",)},
    "blue": {"en": ("blue",), "es": ("azul",), "hi": ("नीला", "नीली", "नीले"),
             "zh": ("蓝色",)},
    "yellow": {"en": ("yellow",), "es": ("amarillo", "amarilla"),
               "hi": ("पीला", "पीली", "पीले"), "zh": ("黄色",)},
    "circle": {"en": ("circle",), "es": ("círculo",), "hi": ("गोला",), "zh": ("圆形",)},
    "square": {"en": ("square",), "es": ("cuadrado",), "hi": ("वर्ग",), "zh": ("正方形",)},
    "triangle": {"en": ("triangle",), "es": ("triángulo",), "hi": ("त्रिभुज",),
                 "zh": ("三角形",)},
    "star": {"en": ("star",), "es": ("estrella",), "hi": ("तारा",), "zh": ("星星",)},
    "big": {"en": ("big", "large"), "es": ("grande", "gran"), "hi": ("बड़ा", "बड़ी"),
            "zh": ("大",)},
    "small": {"en": ("small", "tiny"), "es": ("pequeño", "pequeña"), "hi": ("छोटा", "छोटी"),
              "zh": ("小",)},
    "left": {"en": ("left",), "es": ("izquierda", "izquierdo"), "hi": ("बाईं",),
             "zh": ("左边", "左侧")},
    "center": {"en": ("middle", "center"), "es": ("centro",), "hi": ("बीच",),
               "zh": ("中间", "中央")},
    "right": {"en": ("right",), "es": ("derecha", "derecho"), "hi": ("दाईं",),
              "zh": ("右边", "右侧")},
}
VECTOR_DIM = 32
# Per-component noise between translations: cosines of about 0.97.
_VECTOR_NOISE = 0.03


def _write_labels(root, written):
    """Open Images-style class descriptions and image labels of the held-out images: colour and
    shape verified positive, the next shape verified negative (readers must leave it out)."""
    with files.replacing(os.path.join(root, "oidv7-class-descriptions.csv")) as f:
        f.write("LabelName,DisplayName\n")
        f.writelines(f"{mid},{name.capitalize()}\n" for name, mid in _LABELS.items())
    shapes = demo_captions.SHAPES
    with files.replacing(os.path.join(root, "oidv7-demo-annotations-human-imagelabels.csv")) \
            as f:
        f.write("ImageID,Source,LabelName,Confidence\n")
        for key, scene in sorted(written):
            absent = shapes[(shapes.index(scene.shape) + 1) % len(shapes)]
            f.write(f"{key},verification,{_LABELS[scene.colour]},1\n"
                    f"{key},verification,{_LABELS[scene.shape]},1\n"
                    f"{key},verification,{_LABELS[absent]},0\n")


def _write_vectors(folder, seed):
    """Tiny aligned word vectors (fastText .vec), from their own generator (the rest stays)."""
    rng = np.random.default_rng([seed, 3600])
    os.makedirs(folder, exist_ok=True)
    concepts = {c: v / np.linalg.norm(v)
                for c, v in zip(_LEXICON, rng.normal(size=(len(_LEXICON), VECTOR_DIM)),
                                strict=True)}
    paths = {}
    for lang in demo_captions.DEMO_LANGS:
        concept_of = {w: c for c, by_lang in _LEXICON.items() for w in by_lang[lang]}
        words = sorted({w for scene in demo_captions.all_scenes()
                        for _, tokenized in demo_captions.captions(scene, lang)
                        for w in tokenized.lower().split()} | set(concept_of))
        paths[lang] = os.path.join(folder, f"wiki.{lang}.align.vec")
        with files.replacing(paths[lang]) as f:
            f.write(f"{len(words)} {VECTOR_DIM}\n")
            for word in words:
                noise = rng.normal(size=VECTOR_DIM)
                vector = (concepts[concept_of[word]] + _VECTOR_NOISE * noise
                          if word in concept_of else noise / np.linalg.norm(noise))
                f.write(word + " " + " ".join(f"{v:.5f}" for v in vector) + " \n")
    return paths


def generate(out_dir, seed=0, *, num_train=1800, num_restval=200, num_val=100, num_test=100,
             num_xm3600=100, image_size=64, vocab_size=1000, build_tfds=True, vifidel=True):
    """Writes the demo COCO-35L, XM3600 and vocabulary under `out_dir`; returns their paths.

    The same seed writes byte-identical files. Karpathy train and restval form the training
    set, val the dev set. `build_tfds` also builds COCO-35L under DIR/tfds; `vifidel` also
    writes VIFIDEL's labels and word vectors.
    """
    rng = np.random.default_rng(seed)
    coco_root = os.path.join(out_dir, "coco35l")
    xm_root = os.path.join(out_dir, "xm3600")
    texts = _write_coco35l(coco_root, rng, num_train, num_restval, num_val, num_test,
                           image_size)
    written = _write_xm3600(xm_root, rng, num_xm3600, image_size)
    # BPE, not mT5's unigram: on ~100 distinct words repeated thousands of times unigram EM
    # stalls at near-character pieces. zh words are delimited so pieces are words, not phrases.
    lang_prompts = [prompts.prompt_text(lang) for lang in languages.XM3600_LANGS]
    vocab = train_sentencepiece(
        texts, os.path.join(out_dir, "spm", "demo"), vocab_size,
        user_defined_symbols=lang_prompts,
        model_type="bpe", pretokenization_delimiter=_WORD_DELIMITER)
    paths = {"coco35l": coco_root, "xm3600": xm_root, "vocab": vocab}
    if vifidel:
        _write_labels(xm_root, written)
        paths["vectors"] = os.path.join(out_dir, "vectors")
        _write_vectors(paths["vectors"], seed)
    if build_tfds:
        paths["tfds"] = os.path.join(out_dir, "tfds")
        # A rebuilt demo must not reuse a stale build of the old files.
        shutil.rmtree(os.path.join(paths["tfds"], "coco35l"), ignore_errors=True)
        build_lib.build("coco35l", manual_dir=coco_root, data_dir=paths["tfds"], config="core")
    return paths


def main(argv=None):
    errors.quiet_native_logs()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num_train", type=int, default=1800)
    parser.add_argument("--num_xm3600", type=int, default=100)
    parser.add_argument("--image_size", type=int, default=64)
    parser.add_argument("--no_tfds", action="store_true", help="skip the COCO-35L build")
    args = parser.parse_args(argv)
    start = time.time()
    paths = generate(args.out, args.seed, num_train=args.num_train,
                     num_xm3600=args.num_xm3600, image_size=args.image_size,
                     build_tfds=not args.no_tfds)
    print(f"demo data written in {time.time() - start:.1f}s:")
    for name, path in paths.items():
        print(f"  {name}: {path}")


if __name__ == "__main__":
    main()
