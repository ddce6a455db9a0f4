"""BB+CC, stage 1: mT5-base + ViT-B/16 pretrained on CC3M-35L (the paper's Table 3).

    python train.py --config configs/bb_cc_pretrain.py --workdir $RUNS/bb_cc_pretrain \
        --distributed
    # then configs/bb_cc_finetune.py (stage 2) from this run's last checkpoint.
    # CPU smoke test on the demo data:
    #   --config configs/bb_cc_pretrain.py:smoke --workdir runs/bb_cc_pretrain_smoke

Expected: the paper reports BB+CC only after the finetuning on COCO-35L (bb_cc_finetune.py: XM3600
35-language average 0.293); it gives no numbers for this stage.

From the paper: towers, CC3M-35L (3,318,333 images x 35 languages), Adafactor, batch 2048, learning
rate 3e-4 constant for 10k steps then reverse square-root decay. Not in the paper, chosen here:
100k steps (~1.8 passes over the (image, language) pairs; the rate ends at 0.95e-4), AugReg
ViT-B/16 with its [cls] token, mT5 dropout 0.1. In-loop XM3600 evaluation of the core four every 5k
steps (expect low CIDEr before finetuning). The smoke variant trains on the demo's COCO-35L layout.
"""

from configs import common


def get_config(arg=None):
    """Returns the BB+CC pretraining config; "smoke" gives the CPU variant (locked)."""
    return common.paper_config(arg, "cc3m35l", t5="mt5-base", vit="B/16", every=5000,
                               total_steps=100_000, base_lr=3e-4, smoke_image_size=32)
