"""What the configs share: `schema()` (training/run_config.FIELDS), which each config file fills
in and locks, the baselines' paths and settings, and their `:smoke` variant.
"""

from data import languages
from training import run_config

DATA_ROOT = "/data/xm3600"  # A disk or NFS mount present on every host (docs/baselines.md).
MT5_VOCAB = "gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model"
# T5X checkpoints of the public mT5 release (step 1M of mC4 pretraining).
MT5_CHECKPOINTS = {
    "mt5-base": "gs://t5-data/pretrained_models/t5x/mt5_base/checkpoint_1000000",
    "mt5-large": "gs://t5-data/pretrained_models/t5x/mt5_large/checkpoint_1000000",
}
# ViT-B/16: AugReg ImageNet-21k (Steiner et al. 2021; its classifier head is ignored). The
# paper's ViT-g/14 (Zhai et al. 2022, JFT-3B, MAP head) is not public: put a big_vision .npz of
# a g/14 there (the loader resamples position embeddings to 16x16).
VIT_B16 = ("gs://vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-"
           "sd_0.0.npz")
VIT_G14 = f"{DATA_ROOT}/checkpoints/vit_g14.npz"

# Images of COCO-35L's training split; an epoch visits each (image, language) pair once.
COCO35L_TRAIN_IMAGES = 113_287

TRAIN_LANGS = tuple(languages.TRAIN_35L_LANGS)  # The paper's 35 training languages.
CORE_LANGS = tuple(languages.CORE_LANGS)  # en, es, hi, zh: the in-loop evaluations.
VARIANTS, schema = ("", "smoke"), run_config.schema
DEMO_DIR = "demo_data"  # `python -m tools.demo --out demo_data` (make demo).


def baseline(dataset, *, t5, vit, every):
    """The schema as the paper's baselines share it (Sec. 3.2; 64 v4 chips): batch 2048, mT5's
    vocabulary, 35 languages, 64-token captions (packed), 224 px, bf16, layers scanned, towers
    pretrained;
    in-loop XM3600 (and, 5x less often, COCO-dev) evaluations of the core four.
    """
    c = schema()
    g14 = vit == "g/14"
    c.batch_size = 2048
    c.vocab.path = MT5_VOCAB
    c.data.update(dataset=dataset, manual_dir=f"{DATA_ROOT}/{dataset}",
                  tfds_data_dir=f"{DATA_ROOT}/tfds", langs=TRAIN_LANGS, max_prompt_len=16,
                  max_target_len=64, pack=True)
    c.model.update(image_size=224, dtype="bfloat16", dropout=0.1, scan=True, remat=g14)
    c.model.vit.update(variant=vit, pool="map" if g14 else "tok")
    c.model.t5.variant = t5
    c.init.update(mt5=MT5_CHECKPOINTS[t5], vit=VIT_G14 if g14 else VIT_B16)
    c.evals.xm3600.update(data_dir=f"{DATA_ROOT}/xm3600", langs=CORE_LANGS, every=every,
                          batch_size=960, max_decode_len=64)
    c.evals.coco_dev.update(manual_dir=f"{DATA_ROOT}/coco35l", langs=CORE_LANGS,
                            every=5 * every, batch_size=960, max_decode_len=64)
    c.checkpoint.update(every=every, keep=3)
    c.mesh.fsdp = g14
    return c


def paper_config(arg, dataset, *, t5, vit, every, total_steps, base_lr, smoke_image_size):
    """A baseline trained from its towers at `base_lr`, constant for 10k steps then decaying as
    rsqrt (the paper's schedule); `arg` "smoke" gives its CPU smoke variant (locked either way).
    """
    variant = check_variant(arg)
    c = baseline(dataset, t5=t5, vit=vit, every=every)
    c.total_steps = total_steps
    c.lr.update(base=base_lr, constant_steps=10_000, schedule="rsqrt")
    if variant == "smoke":
        smoke(c, image_size=smoke_image_size)
    return c.lock()


def smoke(c, *, image_size, data_dir=DEMO_DIR):
    """Turns a baseline into its `:smoke` variant in place: 4 CPU steps of tiny towers of the
    same variants on the demo data in `data_dir`.
    """
    c.update(total_steps=4, batch_size=8, log_every=1)
    if c.lr.schedule == "rsqrt":
        c.lr.constant_steps = 2
    c.vocab.path = f"{data_dir}/spm/demo.model"
    c.data.update(dataset="coco35l", manual_dir=f"{data_dir}/coco35l", tfds_data_dir="",
                  langs=CORE_LANGS, max_prompt_len=8, max_target_len=16)
    c.model.image_size = image_size
    c.model.vit.update(width=32, depth=1, mlp_dim=64, num_heads=2)
    c.model.t5.update(emb_dim=32, num_heads=2, head_dim=16, mlp_dim=64, num_encoder_layers=1,
                      num_decoder_layers=1)
    c.init.update(mt5="", vit="")
    c.evals.xm3600.update(data_dir=f"{data_dir}/xm3600", every=2, batch_size=8,
                          max_decode_len=8)
    c.evals.coco_dev.update(manual_dir=f"{data_dir}/coco35l", every=4, batch_size=8,
                            max_decode_len=8, max_images=16)
    c.checkpoint.update(every=2, keep=2)


def check_variant(arg):
    """The variant named after the file name (`configs/bb.py:smoke`), or a clear error."""
    variant = arg or ""
    if variant not in VARIANTS:
        raise ValueError(f"unknown config variant {variant!r}; known: "
                         f"{', '.join(repr(v) for v in VARIANTS)} (e.g. configs/bb.py:smoke)")
    return variant
