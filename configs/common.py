"""Shared pieces of the paper's baseline configs (bb, bg, lg, bb_cc_pretrain, bb_cc_finetune).

Each baseline file states what differs (towers, data, learning rate, length)
and calls `baseline(...)`, which fills in what the paper's Sec. 3.2 and
Table 3 share: Adafactor, batch 2048, the constant-then-rsqrt learning rate,
mT5's 250k vocabulary, the 35 training languages, 224-px images, 'pooled'
fusion, bf16 activations, layers under nn.scan (for compile time; the
checkpoint loaders stack per-layer upstream weights), and pretrained mT5 / ViT
towers. `smoke(...)` turns a baseline into its `:smoke` variant: tiny towers
on the demo data on a CPU,
everything else (optimizer, schedule shape, fusion, init mechanics, mesh
rules) kept. The field structure is that of configs/demo.py, which is what
train.py reads.

Paths. Real data lives under DATA_ROOT (a disk or NFS mount present on every
host; `python -m data.build` writes the TFDS datasets there), the pretrained
towers on Google Cloud Storage. Override any of them on the command line,
e.g. `--config.data.tfds_data_dir=/mnt/disks/data/tfds`.
"""

import ml_collections
from ml_collections import config_dict

from data import languages

DATA_ROOT = "/data/xm3600"
MT5_VOCAB = "gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model"
# T5X checkpoints of the public mT5 release (step 1M of mC4 pretraining).
MT5_CHECKPOINTS = {
    "mt5-base": "gs://t5-data/pretrained_models/t5x/mt5_base/checkpoint_1000000",
    "mt5-large": "gs://t5-data/pretrained_models/t5x/mt5_large/checkpoint_1000000",
}
# ViT-B/16: the AugReg ImageNet-21k checkpoint (Steiner et al. 2021; [cls]
# token and classifier head, the head is ignored). ViT-g/14: the paper's
# (Zhai et al. 2022, JFT-3B, MAP head) is not public; put a big_vision-format
# .npz of a g/14 there (the loader resamples position embeddings to 16x16).
VIT_CHECKPOINTS = {
    "B/16": "gs://vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-"
            "sd_0.0.npz",
    "g/14": f"{DATA_ROOT}/checkpoints/vit_g14.npz",
}
# How each ViT pools its output into the one vector put before the prompt:
# as it was pretrained ([cls] token for AugReg, MAP head for the g/14).
VIT_POOL = {"B/16": "tok", "g/14": "map"}

# Images of the training splits (data/releases/coco35l.py, the README's Datasets section). One
# epoch of the input pipeline visits each (image, language) pair once, with
# one of its references drawn at random (data/pipeline/sampling.py).
COCO35L_TRAIN_IMAGES = 113_287
CC3M35L_TRAIN_IMAGES = 3_318_333

BATCH_SIZE = 2048
CORE_LANGS = tuple(languages.CORE_LANGS)  # en, es, hi, zh: the in-loop evaluation.
VARIANTS = ("", "smoke")
DEMO_DIR = "demo_data"


def epoch_examples(images, langs):
    """Examples in one pass of the pipeline over a split: images x languages."""
    return images * len(langs)


def _placeholder():
    # An int field that is None (= the variant's size) and can still be set
    # from the command line, which plain None fields cannot.
    return config_dict.placeholder(int)


def baseline(*, vit, t5, dataset, lr, constant_steps, total_steps, schedule="rsqrt",
             remat=False, fsdp=False, eval_every=1000):
    """The full-size config of one baseline (unlocked, for the caller to finish).

    Args:
        vit: "B/16" or "g/14".
        t5: "mt5-base" or "mt5-large".
        dataset: "coco35l" or "cc3m35l".
        lr: the base learning rate.
        constant_steps: steps at the constant rate before the rsqrt decay.
        total_steps: training steps.
        schedule: "rsqrt" (the paper's) or "constant" (BB+CC's finetuning).
        remat: rematerialize each layer in the backward pass (~20% more FLOPs,
            much less activation memory: the g/14 towers).
        fsdp: shard parameters over the data axis too (towers of ~2B parameters).
        eval_every: steps between in-loop evaluations.

    Returns:
        An unlocked ConfigDict with the fields of configs/demo.py (+ evals.coco_dev).
    """
    c = ml_collections.ConfigDict()
    c.seed = 0                            # Init and data order are functions of it.
    c.total_steps = total_steps           # Training steps (the paper does not give them).
    c.batch_size = BATCH_SIZE             # Global batch (Sec. 3.2), split over 64 chips.
    c.grad_accum_steps = 1                # Micro-batches per step; 32 examples per chip fit.
    c.log_every = 100                     # Steps between metrics.jsonl lines.

    # Adafactor with the paper's schedule: `base` for `constant_steps`, then
    # base * sqrt(constant_steps / step) (Sec. 3.2); "constant" never decays.
    c.lr = ml_collections.ConfigDict(dict(base=lr, constant_steps=constant_steps,
                                          schedule=schedule))
    c.optimizer = ml_collections.ConfigDict(dict(
        clipping_threshold=1.0,           # Adafactor's update clipping (T5X default).
        decay_rate=0.8,                   # Second-moment decay exponent (T5X default).
    ))
    c.label_smoothing = 0.0               # T5X finetuning default; the paper names none.
    c.z_loss = 1e-4                       # T5X's auxiliary log(Z)^2 loss.

    c.vocab = ml_collections.ConfigDict(dict(path=MT5_VOCAB))  # mT5's 250k SentencePiece.
    c.data = ml_collections.ConfigDict(dict(
        dataset=dataset,                  # COCO-35L or CC3M-35L release (data/releases/).
        manual_dir=f"{DATA_ROOT}/{dataset}",  # The release files (TFDS manual_dir).
        reader="tfds",                    # Built datasets (python -m data.build; docs/datasets.md).
        tfds_data_dir=f"{DATA_ROOT}/tfds",  # Where data.build wrote them.
        num_workers=_placeholder(),       # Processes making batches; None: one per core.
        langs=tuple(languages.TRAIN_35L_LANGS),  # The 35 training languages.
        mixture="uniform",                # Every language has every image: = proportional.
        prompt_template="<2{lang}>",      # The LangId string fed to the encoder.
        max_prompt_len=16,                # "<2xx>" is a few mT5 pieces + EOS; room to spare.
        max_target_len=64,                # mT5 pieces of a caption + EOS (T5X-sized).
        augment=False,                    # No crops: the paper mentions no augmentation.
        corrupt_images="stop",            # A JPEG that does not decode: "stop" or "skip" it.
    ))
    c.model = ml_collections.ConfigDict(dict(
        image_size=224,                   # ViT input (Sec. 3.2 towers at their 224 px).
        fusion="pooled",                  # The paper: one pooled image vector + LangId tokens.
        dtype="bfloat16",                 # Activations; parameters stay float32.
        dropout=0.1,                      # mT5 dropout (T5X finetuning default).
        scan=True,                        # nn.scan over layers: one compiled layer per stack
                                          # (BB on a CPU: step compiles ~3x, initializer
                                          # ~6x faster than unrolled; same checkpoints).
        remat=remat,                      # Recompute layer activations in the backward pass.
        remat_policy="full",              # What remat keeps: "full" nothing (least memory),
                                          # "dots" the matmul outputs (model/layers.py).
        vit=dict(
            variant=vit,                  # big_vision size/patch name.
            pool=VIT_POOL[vit],           # How the checkpoint pools (see VIT_POOL).
            posemb="learn",               # Learned position embeddings, as pretrained.
            width=_placeholder(),         # None: the variant's (same for the 3 below).
            depth=_placeholder(),
            mlp_dim=_placeholder(),
            num_heads=_placeholder()),
        t5=dict(
            variant=t5,                   # T5X mT5 size (model/t5.py).
            emb_dim=_placeholder(),       # None: the variant's (same for the 6 below).
            num_heads=_placeholder(),
            head_dim=_placeholder(),
            mlp_dim=_placeholder(),
            num_encoder_layers=_placeholder(),
            num_decoder_layers=_placeholder(),
            vocab_size=_placeholder()),   # None: the vocabulary's, padded to 128 (250112).
    ))
    c.init = ml_collections.ConfigDict(dict(
        mt5=MT5_CHECKPOINTS[t5],          # T5X checkpoint of the text tower.
        vit=VIT_CHECKPOINTS[vit],         # big_vision .npz of the image tower.
        checkpoint="",                    # Params of another run (BB+CC finetuning).
    ))

    c.evals = ml_collections.ConfigDict()
    # Evaluators by name (evaluation/evaluators/): in the loop every `every` steps (and at step
    # 0 and the end; 0 = only with python -m evaluation.evaluate), on the core four languages;
    # all languages after training with `python -m evaluation.evaluate` (see README).
    c.evals.xm3600 = ml_collections.ConfigDict(dict(
        type="xm3600_cider",              # CIDEr-D on XM3600's human references.
        data_dir=f"{DATA_ROOT}/xm3600",   # captions.jsonl + images/ (README: Datasets).
        langs=CORE_LANGS,                 # In the loop: the core four.
        every=eval_every,                 # Steps between evaluations.
        batch_size=960,                   # Divides by 64 chips; 3600 images = 4 batches.
        max_decode_len=64,                # = data.max_target_len.
        max_images=None,                  # None: all 3600 images.
    ))
    c.evals.coco_dev = ml_collections.ConfigDict(dict(
        type="coco_dev_cider",            # CIDEr-D on COCO-35L dev (the paper's 2nd column).
        manual_dir=f"{DATA_ROOT}/coco35l",  # COCO-35L release: Karpathy val, 5000 images,
                                            # machine-translated references.
        langs=CORE_LANGS,                 # In the loop: the core four.
        every=5 * eval_every,             # Less often than XM3600: 5000 images a language.
        batch_size=960,                   # Divides by 64 chips; 5000 images = 6 batches.
        max_decode_len=64,
        max_images=None,                  # None: all 5000 images.
    ))
    c.checkpoint = ml_collections.ConfigDict(dict(
        every=1000,                       # Steps between checkpoints.
        keep=3,                           # How many recent ones are kept.
        best_metric="eval/cider_d/avg",   # checkpoints_best/ keeps the highest of this.
    ))
    c.mesh = ml_collections.ConfigDict(dict(
        data=-1,                          # All devices on the data axis: 64 on a v4-128.
        model=1,                          # No tensor parallelism: the towers fit a chip.
        fsdp=fsdp,                        # Shard parameters' embed axis over data too.
    ))
    return c


def smoke(c, *, image_size, total_steps=4, constant_steps=2):
    """Turns a baseline into its `:smoke` variant, in place: a few CPU steps on demo data.

    Tiny towers of the same variants (patch size, pooling, scan/remat), the demo
    vocabulary and data (`python -m data.demo --out demo_data`), small batches;
    the optimizer, schedule shape (constant then rsqrt, with a short constant
    period so that both parts run), fusion, dtype, init.checkpoint mechanics
    and mesh rules are the baseline's. Pretrained mT5/ViT files are not used.

    Args:
        c: the unlocked baseline config.
        image_size: the demo input size (a multiple of the ViT patch).
        total_steps: training steps.
        constant_steps: the constant period of an rsqrt schedule.

    Returns:
        `c`.
    """
    c.total_steps = total_steps
    c.batch_size = 8
    c.log_every = 1
    if c.lr.schedule == "rsqrt":
        c.lr.constant_steps = constant_steps
    c.vocab.path = f"{DEMO_DIR}/spm/demo.model"
    c.data.update(dict(dataset="coco35l", manual_dir=f"{DEMO_DIR}/coco35l", reader="files",
                       tfds_data_dir="", langs=CORE_LANGS, max_prompt_len=8,
                       max_target_len=16))
    c.model.image_size = image_size
    c.model.vit.update(dict(width=32, depth=1, mlp_dim=64, num_heads=2))
    c.model.t5.update(dict(emb_dim=32, num_heads=2, head_dim=16, mlp_dim=64,
                           num_encoder_layers=1, num_decoder_layers=1))
    c.init.mt5, c.init.vit = "", ""
    c.evals.xm3600.update(dict(data_dir=f"{DEMO_DIR}/xm3600", every=2, batch_size=8,
                               max_decode_len=8))
    c.evals.coco_dev.update(dict(manual_dir=f"{DEMO_DIR}/coco35l", every=4, batch_size=8,
                                 max_decode_len=8, max_images=16))
    c.checkpoint.update(dict(every=2, keep=2))
    return c


def check_variant(arg):
    """The variant named after the file name (`configs/bb.py:smoke`), or a clear error."""
    variant = arg or ""
    if variant not in VARIANTS:
        raise ValueError(f"unknown config variant {variant!r}; known: "
                         f"{', '.join(repr(v) for v in VARIANTS)} (e.g. configs/bb.py:smoke)")
    return variant
