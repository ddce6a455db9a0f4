"""BB+CC, stage 2: finetune the CC3M-35L-pretrained BB on COCO-35L (the paper's Table 3).

    python train.py --config configs/bb_cc_finetune.py --workdir $RUNS/bb_cc_finetune \
        --distributed --config.init.checkpoint=$RUNS/bb_cc_pretrain
    python -m evaluation.evaluate --config configs/bb_cc_finetune.py --workdir $RUNS/bb_cc_finetune
    # CPU smoke test (after bb_cc_pretrain.py:smoke in runs/bb_cc_pretrain_smoke):
    #   --config configs/bb_cc_finetune.py:smoke --workdir runs/bb_cc_finetune_smoke

Expected (the paper's cider_per_language.csv): XM3600 CIDEr-D averaged over the 35 training
languages 0.293 (en 0.584, es 0.425, hi 0.197, zh 0.202; core-four average 0.352); COCO-dev 0.806.

From the paper: the parameters of the CC3M-35L run (`init.checkpoint`: its workdir, whose latest
checkpoint is used, or a `checkpoints/<step>` folder), a fresh Adafactor, a constant learning rate
of 3e-5 for one epoch of COCO-35L: one pass over the 113,287 x 35 (image, language) pairs, 1,936
steps of 2048.
"""

from configs import common


def get_config(arg=None):
    """Returns the BB+CC finetuning config; "smoke" gives the CPU variant (locked)."""
    variant = common.check_variant(arg)
    c = common.baseline("coco35l", t5="mt5-base", vit="B/16", every=500)
    epoch = common.COCO35L_TRAIN_IMAGES * len(common.TRAIN_LANGS)  # (image, language) pairs
    c.total_steps = round(epoch / c.batch_size)  # One epoch: 1,936 steps.
    c.lr.update(base=3e-5, constant_steps=c.total_steps, schedule="constant")  # (unused)
    c.init.update(mt5="", vit="", checkpoint="runs/bb_cc_pretrain")
    if variant == "smoke":
        common.smoke(c, image_size=32)
        c.init.checkpoint = "runs/bb_cc_pretrain_smoke"
    return c.lock()
