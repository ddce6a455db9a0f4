"""The demo: a tiny ViT + mT5 captioner trained on synthetic shapes in four languages.

    make demo
    # = python -m tools.demo --out demo_data   (once)
    #   python train.py --config configs/demo.py --workdir runs/demo

Expected (measured on a 2-core CPU, see README): the XM3600-layout held-out split's average CIDEr-D
over en/es/hi/zh goes from ~0 at step 0 to above 2.0. Any field can be overridden, e.g.
`--config.total_steps=300`.
"""

from configs import common

DATA = common.DEMO_DIR


def get_config():
    """Returns the demo config (locked: a misspelled override is an error)."""
    c = common.schema()
    # Training: 1000 steps of 64 examples, the paper's schedule shape at a demo's rate.
    c.total_steps, c.batch_size, c.log_every = 1000, 64, 50
    c.lr.update(base=3e-3, constant_steps=500)
    # Data: the demo's COCO-35L layout in the core four languages, its own vocabulary.
    c.vocab.path = f"{DATA}/spm/demo.model"
    c.data.update(dataset="coco35l", manual_dir=f"{DATA}/coco35l", langs=common.CORE_LANGS,
                  max_prompt_len=8, max_target_len=16)
    # Model: a 2-layer ViT on 64-pixel images (MAP-pooled) and a 2+2-layer T5.
    c.model.image_size = 64
    c.model.vit.update(variant="mu/16", pool="map", width=128, depth=2, mlp_dim=256, num_heads=4)
    c.model.t5.update(variant="t5-tiny", emb_dim=128, num_heads=4, head_dim=32, mlp_dim=256,
                      num_encoder_layers=2, num_decoder_layers=2)
    # In-loop evaluations on the core four (and at step 0 and the end); checkpoints.
    c.evals.xm3600.update(data_dir=f"{DATA}/xm3600", langs=common.CORE_LANGS, every=250,
                          batch_size=64, max_decode_len=24)
    c.evals.coco_dev.update(manual_dir=f"{DATA}/coco35l", langs=common.CORE_LANGS, every=500,
                            batch_size=64, max_decode_len=24)
    c.checkpoint.update(every=250, keep=2)
    return c.lock()
