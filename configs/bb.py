"""BB: mT5-base + ViT-B/16 trained on COCO-35L (the paper's Table 3, Sec. 3.2).

    python train.py --config configs/bb.py --workdir $RUNS/bb --distributed
    python -m evaluation.evaluate --config configs/bb.py --workdir $RUNS/bb   # all 36 languages
    # CPU smoke test on the demo data: --config configs/bb.py:smoke --workdir runs/bb_smoke

Expected (the paper's cider_per_language.csv): XM3600 CIDEr-D averaged over the 35 training
languages 0.142 (en 0.297, es 0.194, hi 0.098, zh 0.087; core-four average 0.169); COCO-dev 0.708.

From the paper: towers, COCO-35L, Adafactor, batch 2048, learning rate 1e-4 constant for 10k steps
then reverse square-root decay. Not in the paper, chosen here: 20k steps in all (10k at the
constant rate, then the decay down to 0.71e-4; ~10 passes over the 113,287 x 35 (image, language)
pairs), the AugReg ImageNet-21k ViT-B/16 and its [cls] token as the pooled vector, mT5 dropout 0.1,
64-token captions. 64 v4 chips, data parallel; layers scanned, not rematerialized. On one 80 GB
GPU at batch 256 add --config.model.remat=True.
"""

from configs import common


def get_config(arg=None):
    """Returns the BB config; `arg` "smoke" gives the CPU smoke variant (locked either way)."""
    return common.paper_config(arg, "coco35l", t5="mt5-base", vit="B/16", every=1000,
                               total_steps=20_000, base_lr=1e-4, smoke_image_size=32)
