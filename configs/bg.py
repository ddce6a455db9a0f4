"""Bg: mT5-base + ViT-g/14 trained on COCO-35L (the paper's Table 3, Sec. 3.2).

    python train.py --config configs/bg.py --workdir $RUNS/bg --distributed \
        --config.init.vit=/path/to/vit_g14.npz
    python -m evaluation.evaluate --config configs/bg.py --workdir $RUNS/bg   # all 36 languages
    # CPU smoke test on the demo data: --config configs/bg.py:smoke --workdir runs/bg_smoke

Expected (the paper's cider_per_language.csv): XM3600 CIDEr-D averaged over the
35 training languages 0.169 (en 0.337, es 0.232, hi 0.112, zh 0.110; core-four
average 0.198); COCO-dev 0.722.

From the paper: towers, COCO-35L, Adafactor, batch 2048, learning rate 1e-4
constant for 10k steps then reverse square-root decay. Not in the paper,
chosen here: 20k steps in all (as BB), mT5 dropout 0.1, 64-token captions.
The paper's ViT-g/14 (JFT-3B) is not public: `init.vit` must name a
big_vision-format g/14 .npz (with a MAP head, whose output is the pooled
vector). 64 v4 chips, data parallel with the parameters' embed axis sharded
over the chips too (FSDP) and layers scanned and rematerialized: ~1.6B
parameters with their gradients would otherwise crowd a 32 GiB chip.
On one 80 GB GPU (an estimate from XLA's memory analysis on a CPU, to
be confirmed): --config.mesh.fsdp=False --config.grad_accum_steps=8 (256
examples per micro-batch, ~49 GiB); without remat even 32 examples need ~100 GiB.
"""

from configs import common


def get_config(arg=None):
    """Returns the Bg config; `arg` "smoke" gives the CPU smoke variant (locked either way)."""
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

    # Model: ViT-g/14 (MAP-head pooled) at 224 px + mt5-base, bf16, layers scanned and
    # rematerialized, both towers pretrained (init.vit: a g/14 .npz of your own).
    c.model.update(image_size=224, dtype="bfloat16", dropout=0.1, scan=True, remat=True)
    c.model.vit.update(variant="g/14", pool="map")
    c.model.t5.variant = "mt5-base"
    c.init.update(mt5=common.MT5_CHECKPOINTS["mt5-base"], vit=common.VIT_G14)

    # In-loop evaluations of the core four (all 36 languages after training:
    # python -m evaluation.evaluate); batches of 960 divide by 64 chips.
    c.evals.xm3600.update(data_dir=f"{common.DATA_ROOT}/xm3600", langs=common.CORE_LANGS,
                          every=1000, batch_size=960, max_decode_len=64)
    c.evals.coco_dev.update(manual_dir=f"{common.DATA_ROOT}/coco35l", langs=common.CORE_LANGS,
                            every=5000, batch_size=960, max_decode_len=64)
    c.checkpoint.update(every=1000, keep=3)
    c.mesh.update(data=-1, model=1, fsdp=True)  # 64 chips on the data axis, FSDP over it.
    if variant == "smoke":
        common.smoke(c, image_size=28)
    return c.lock()
