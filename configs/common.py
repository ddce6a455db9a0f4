"""The config schema: every field of a run, defined once, with what it means.

`schema()` returns the fields train.py, the in-loop evaluators and the checkpoint tool read,
each with its default, unlocked. A config file (configs/demo.py, the paper's baselines
bb.py, bg.py, lg.py, bb_cc_pretrain.py, bb_cc_finetune.py) starts from it, sets its
experiment's choices and locks it (so that a misspelled override is an error). A field
left None (`_unset`) means what its comment says, or is one every config sets.
tests/tiny.py shrinks the demo's. training/run_config.py checks the values (the ranges live
there; tests/configs/test_schema.py keeps the two in step).

Also here: the paths and checkpoints the baselines share, and `smoke`, which turns a
baseline into its `:smoke` variant (tiny towers on the demo data, on a CPU).
"""

import ml_collections
from ml_collections import config_dict

from data import languages

DATA_ROOT = "/data/xm3600"  # A disk or NFS mount present on every host (docs/baselines.md).
MT5_VOCAB = "gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model"
# T5X checkpoints of the public mT5 release (step 1M of mC4 pretraining).
MT5_CHECKPOINTS = {
    "mt5-base": "gs://t5-data/pretrained_models/t5x/mt5_base/checkpoint_1000000",
    "mt5-large": "gs://t5-data/pretrained_models/t5x/mt5_large/checkpoint_1000000",
}
# ViT-B/16: the AugReg ImageNet-21k checkpoint (Steiner et al. 2021; [cls] token and
# classifier head, the head is ignored), pooled with its [cls] token. ViT-g/14: the paper's
# (Zhai et al. 2022, JFT-3B, MAP head) is not public; put a big_vision-format .npz of a g/14
# there (the loader resamples position embeddings to 16x16), pooled with its MAP head.
VIT_B16 = ("gs://vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-"
           "sd_0.0.npz")
VIT_G14 = f"{DATA_ROOT}/checkpoints/vit_g14.npz"

# Images of the training splits (data/releases/coco35l.py, the README's Datasets section). One
# epoch of the input pipeline visits each (image, language) pair once, with one of its
# references drawn at random (data/pipeline/sampling.py).
COCO35L_TRAIN_IMAGES = 113_287
CC3M35L_TRAIN_IMAGES = 3_318_333

TRAIN_LANGS = tuple(languages.TRAIN_35L_LANGS)  # The paper's 35 training languages.
CORE_LANGS = tuple(languages.CORE_LANGS)  # en, es, hi, zh: the in-loop evaluations.
VARIANTS = ("", "smoke")
DEMO_DIR = "demo_data"  # `python -m data.demo --out demo_data` (make demo).


def _unset(kind):
    """A field of type `kind` that is None until a config or the command line sets it (a
    plain None field could not be set from the command line). Where the comment names no
    meaning for None, every config sets it."""
    return config_dict.placeholder(kind)


def schema():
    """Every field of a run's config with its default (unlocked, for a config to fill in)."""
    c = ml_collections.ConfigDict()
    c.seed = 0                        # The initialization and the data order follow from it.
    c.total_steps = _unset(int)       # Training steps.
    c.batch_size = _unset(int)        # Global batch, split over devices and processes.
    c.grad_accum_steps = 1            # Micro-batches per step: the same maths, less memory.
    c.log_every = 100                 # Steps between training records in metrics.jsonl.
    # Adafactor (training/optimizer.py) at `base`, constant for `constant_steps`, then
    # base * sqrt(constant_steps / step) ("rsqrt", the paper's Sec. 3.2), or "constant".
    c.lr = ml_collections.ConfigDict(dict(
        base=_unset(float), constant_steps=_unset(int), schedule="rsqrt"))
    c.optimizer = ml_collections.ConfigDict(dict(
        clipping_threshold=1.0,       # Adafactor's update clipping (T5X default).
        decay_rate=0.8,               # Second-moment decay exponent (T5X default).
    ))
    c.label_smoothing = 0.0           # T5X finetuning default; the paper names none.
    c.z_loss = 1e-4                   # T5X's auxiliary log(Z)^2 loss.
    c.vocab = ml_collections.ConfigDict(dict(path=_unset(str)))  # SentencePiece model.
    c.data = _data()
    c.model = _model()
    c.init = ml_collections.ConfigDict(dict(  # Pretrained parameters; "": none.
        mt5="",                       # T5X checkpoint of the text tower.
        vit="",                       # big_vision .npz of the image tower.
        checkpoint="",                # Another run (its workdir or checkpoints/<step>).
    ))
    c.evals = _evals()
    c.checkpoint = ml_collections.ConfigDict(dict(
        every=_unset(int),            # Steps between checkpoints (and the last step).
        keep=3,                       # How many of the newest are kept.
        best_metric="eval/cider_d/avg",  # checkpoints_best/ keeps the highest of this.
    ))
    c.mesh = ml_collections.ConfigDict(dict(
        data=-1,                      # Devices on the data axis; -1: what `model` leaves.
        model=1,                      # Devices on the model (tensor-parallel) axis.
        fsdp=False,                   # Also shard parameters' embed axis over `data`.
    ))
    return c


def _data():
    """config.data: the training data and how batches are made (data/pipeline/)."""
    return ml_collections.ConfigDict(dict(
        dataset=_unset(str),          # "coco35l" or "cc3m35l" (the releases, data/releases/).
        manual_dir=_unset(str),       # The release files (TFDS manual_dir).
        tfds_data_dir="",             # Where `python -m data.build` wrote it; "": beside
                                      # manual_dir.
        num_workers=_unset(int),      # Processes making batches; None: one per core.
        langs=_unset(tuple),          # The training languages.
        prompt_template="<2{lang}>",  # The LangId string fed to the encoder.
        max_prompt_len=_unset(int),   # Prompt tokens with EOS.
        max_target_len=_unset(int),   # Caption tokens with EOS.
        corrupt_images="stop",        # A JPEG that does not decode: "stop" or "skip" it.
    ))


def _model():
    """config.model: the captioner (model/captioner.py)."""
    return ml_collections.ConfigDict(dict(
        image_size=_unset(int),       # ViT input side in pixels.
        fusion="pooled",              # The paper: one pooled image vector + LangId tokens.
        dtype="float32",              # Activations ("bfloat16" too); parameters float32.
        dropout=0.0,                  # mT5 dropout.
        scan=False,                   # nn.scan over layers: one compiled layer per stack
                                      # (same checkpoints; much faster compiles).
        remat=False,                  # Recompute layer activations in the backward pass.
        remat_policy="full",          # What remat keeps: "full" nothing (least memory),
                                      # "dots" the matmul outputs (model/layers.py).
        vit=dict(
            variant=_unset(str),      # big_vision size/patch name ("B/16", "mu/16").
            pool=_unset(str),         # How it pools: "tok" ([cls] token) or "map" (MAP head).
            posemb="learn",           # Learned position embeddings.
            dropout=_unset(float),    # None: the variant's (none).
            width=_unset(int),        # None: the variant's (same for the 3 below).
            depth=_unset(int),
            mlp_dim=_unset(int),
            num_heads=_unset(int)),
        t5=dict(
            variant=_unset(str),      # T5X size name ("mt5-base", "t5-tiny"; model/t5.py).
            emb_dim=_unset(int),      # None: the variant's (same for the 5 below).
            num_heads=_unset(int),
            head_dim=_unset(int),
            mlp_dim=_unset(int),
            num_encoder_layers=_unset(int),
            num_decoder_layers=_unset(int),
            vocab_size=_unset(int)),  # None: the vocabulary's, padded to a multiple of 128.
    ))


def _evaluator(kind, data_field):
    """One entry of config.evals (evaluation/evaluators/)."""
    return ml_collections.ConfigDict({
        "type": kind,                 # The evaluator (evaluation/evaluators/__init__.py).
        data_field: _unset(str),      # Its data.
        "langs": _unset(tuple),       # The languages it scores in the loop.
        "every": _unset(int),         # Steps between runs in the loop (and at step 0 and the
                                      # last); 0: only `python -m evaluation.evaluate`.
        "batch_size": _unset(int),    # Images per decoding batch (split over devices).
        "max_decode_len": _unset(int),  # Caption tokens decoded.
        "max_images": _unset(int),    # None: every image of the split.
        "decode": "greedy",           # "greedy" or "beam".
        "beam_size": _unset(int),     # Beams of "beam"; None: 4.
        "alpha": _unset(float),       # T5X's length penalty of "beam"; None: 0.6.
    })


def _evals():
    """config.evals: the evaluators by name."""
    evals = ml_collections.ConfigDict()
    evals.xm3600 = _evaluator("xm3600_cider", "data_dir")  # captions.jsonl + images/.
    evals.coco_dev = _evaluator("coco_dev_cider", "manual_dir")  # The COCO-35L release.
    return evals


def epoch_examples(images, langs):
    """Examples in one pass of the pipeline over a split: images x languages."""
    return images * len(langs)


def smoke(c, *, image_size, total_steps=4, constant_steps=2):
    """Turns a baseline into its `:smoke` variant, in place: a few CPU steps on demo data.

    Tiny towers of the same variants (patch size, pooling, scan/remat), the demo
    vocabulary and data (`python -m data.demo --out demo_data`), small batches; the
    optimizer, schedule shape (constant then rsqrt, with a short constant period so that
    both parts run), fusion, dtype, init.checkpoint mechanics and mesh rules are the
    baseline's. Pretrained mT5/ViT files are not used.

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
    c.data.update(dict(dataset="coco35l", manual_dir=f"{DEMO_DIR}/coco35l",
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
