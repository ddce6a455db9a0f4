"""BB: mT5-base + ViT-B/16 trained on COCO-35L (the paper's Table 3, Sec. 3.2).

    python train.py --config configs/bb.py --workdir $RUNS/bb --distributed
    python -m evaluation.evaluate --config configs/bb.py --workdir $RUNS/bb   # all 36 languages
    # CPU smoke test on the demo data: --config configs/bb.py:smoke --workdir runs/bb_smoke

Expected (the paper's cider_per_language.csv): XM3600 CIDEr-D averaged over the
35 training languages 0.142 (en 0.297, es 0.194, hi 0.098, zh 0.087; core-four
average 0.169); COCO-dev 0.708.

From the paper: towers, COCO-35L, Adafactor, batch 2048, learning rate 1e-4
constant for 10k steps then reverse square-root decay. Not in the paper,
chosen here: 20k steps in all (10k at the constant rate, then the decay down
to 0.71e-4; ~10 passes over the 113,287 x 35 (image, language) pairs), the
AugReg ImageNet-21k ViT-B/16 and its [cls] token as the pooled vector, mT5
dropout 0.1, 64-token captions. 64 v4 chips, data parallel (32 examples per
chip); BB fits a chip without sharding its parameters. Layers scanned, not
rematerialized: XLA's memory analysis of the step at 32 examples (on a CPU,
an estimate) is 21.7 GiB. On one 80 GB GPU at batch 256 add
--config.model.remat=True (estimated 12.6 GiB; 114 GiB without remat).
"""

from configs import common


def get_config(arg=None):
    """Returns the BB config; `arg` "smoke" gives the CPU smoke variant (locked either way)."""
    variant = common.check_variant(arg)
    c = common.schema()
    # Training (Sec. 3.2): batch 2048, 1e-4 constant for 10k steps, then rsqrt; 20k in all.
    c.total_steps, c.batch_size = 20_000, 2048
    c.lr.update(base=1e-4, constant_steps=10_000, schedule="rsqrt")

    # Data: COCO-35L in its 35 languages (built by python -m data.build), mT5's vocabulary.
    c.vocab.path = common.MT5_VOCAB
    c.data.update(dataset="coco35l", manual_dir=f"{common.DATA_ROOT}/coco35l",
                  tfds_data_dir=f"{common.DATA_ROOT}/tfds", langs=common.TRAIN_LANGS,
                  max_prompt_len=16, max_target_len=64)

    # Model: ViT-B/16 ([cls] token pooled) at 224 px + mT5-base, bf16, layers scanned, both
    # towers pretrained.
    c.model.update(image_size=224, dtype="bfloat16", dropout=0.1, scan=True, remat=False)
    c.model.vit.update(variant="B/16", pool="tok")
    c.model.t5.variant = "mt5-base"
    c.init.update(mt5=common.MT5_CHECKPOINTS["mt5-base"], vit=common.VIT_B16)

    # In-loop evaluations of the core four (all 36 languages after training:
    # python -m evaluation.evaluate); batches of 960 divide by 64 chips.
    c.evals.xm3600.update(data_dir=f"{common.DATA_ROOT}/xm3600", langs=common.CORE_LANGS,
                          every=1000, batch_size=960, max_decode_len=64)
    c.evals.coco_dev.update(manual_dir=f"{common.DATA_ROOT}/coco35l", langs=common.CORE_LANGS,
                            every=5000, batch_size=960, max_decode_len=64)
    c.checkpoint.update(every=1000, keep=3)
    c.mesh.update(data=-1, model=1, fsdp=False)  # 64 chips on the data axis.
    if variant == "smoke":
        common.smoke(c, image_size=32)
    return c.lock()
