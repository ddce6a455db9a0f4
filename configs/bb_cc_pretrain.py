"""BB+CC, stage 1: mT5-base + ViT-B/16 pretrained on CC3M-35L (the paper's Table 3).

    python train.py --config configs/bb_cc_pretrain.py --workdir $RUNS/bb_cc_pretrain \
        --distributed
    # then configs/bb_cc_finetune.py (stage 2) from this run's last checkpoint.
    # CPU smoke test on the demo data:
    #   --config configs/bb_cc_pretrain.py:smoke --workdir runs/bb_cc_pretrain_smoke

Expected: the paper reports BB+CC only after the finetuning on COCO-35L
(bb_cc_finetune.py: XM3600 35-language average 0.293); it gives no numbers for
this stage.

From the paper: towers, CC3M-35L (3,318,333 images x 35 languages), Adafactor,
batch 2048, learning rate 3e-4 constant for 10k steps then reverse square-root
decay. Not in the paper, chosen here: 100k steps (~1.8 passes over the
(image, language) pairs; the rate ends at 0.95e-4), AugReg ViT-B/16 with its
[cls] token, mT5 dropout 0.1. In-loop XM3600 evaluation of the core four every
5k steps (captions of CC3M style: expect low CIDEr before finetuning). The
smoke variant trains on the demo's COCO-35L layout: the demo has no CC3M-35L.
"""

from configs import common


def get_config(arg=None):
    """Returns the BB+CC pretraining config; "smoke" gives the CPU variant (locked)."""
    variant = common.check_variant(arg)
    c = common.schema()
    # Training (Table 3): batch 2048, 3e-4 constant for 10k steps, then rsqrt; 100k in all.
    c.total_steps, c.batch_size = 100_000, 2048
    c.lr.update(base=3e-4, constant_steps=10_000, schedule="rsqrt")

    # Data: CC3M-35L in its 35 languages (built by python -m data.build), mT5's vocabulary.
    c.vocab.path = common.MT5_VOCAB
    c.data.update(dataset="cc3m35l", manual_dir=f"{common.DATA_ROOT}/cc3m35l",
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
                          every=5000, batch_size=960, max_decode_len=64)
    c.evals.coco_dev.update(manual_dir=f"{common.DATA_ROOT}/coco35l", langs=common.CORE_LANGS,
                            every=25000, batch_size=960, max_decode_len=64)
    c.checkpoint.update(every=5000, keep=3)
    c.mesh.update(data=-1, model=1, fsdp=False)  # 64 chips on the data axis.
    if variant == "smoke":
        common.smoke(c, image_size=32)
    return c.lock()
