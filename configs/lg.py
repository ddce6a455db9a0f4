"""Lg: mT5-large + ViT-g/14 trained on COCO-35L (the paper's Table 3, Sec. 3.2).

    python train.py --config configs/lg.py --workdir $RUNS/lg --distributed \
        --config.init.vit=/path/to/vit_g14.npz
    python -m evaluation.evaluate --config configs/lg.py --workdir $RUNS/lg   # all 36 languages
    # CPU smoke test on the demo data: --config configs/lg.py:smoke --workdir runs/lg_smoke

Expected (the paper's cider_per_language.csv): XM3600 CIDEr-D averaged over the 35 training
languages 0.155 (en 0.343, es 0.220, hi 0.111, zh 0.099; core-four average 0.193); COCO-dev 0.686.
(In the paper Lg is below Bg on XM3600.)

From the paper: towers, COCO-35L, Adafactor, batch 2048, learning rate 1e-4 constant for 10k steps
then reverse square-root decay. Not in the paper, chosen here: 20k steps in all (as BB), mT5
dropout 0.1, 64-token captions. The paper's ViT-g/14 (JFT-3B) is not public: `init.vit` must name a
big_vision-format g/14 .npz (with a MAP head). 64 v4 chips, data parallel with FSDP, layers
scanned and rematerialized. On one 80 GB GPU: --config.mesh.fsdp=False --config.grad_accum_steps=8.
"""

from configs import common


def get_config(arg=None):
    """Returns the Lg config; `arg` "smoke" gives the CPU smoke variant (locked either way)."""
    return common.paper_config(arg, "coco35l", t5="mt5-large", vit="g/14", every=1000,
                               total_steps=20_000, base_lr=1e-4, smoke_image_size=28)
