"""The demo: a tiny ViT + mT5 captioner trained on synthetic shapes in four languages.

    make demo
    # = python -m data.demo --out demo_data   (once)
    #   python train.py --config configs/demo.py --workdir runs/demo

Expected (measured on a 2-core CPU, see README): the XM3600-layout held-out
split's average CIDEr-D over en/es/hi/zh goes from ~0 at step 0 to above 2.0.
Any field can be overridden, e.g. `--config.total_steps=300`.
"""

import ml_collections
from ml_collections import config_dict


def get_config():
    """Returns the demo config (locked: a misspelled override is an error)."""
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.total_steps = 1000                  # Training steps.
    c.batch_size = 64                     # Global batch, split over devices and processes.
    c.grad_accum_steps = 1                # Micro-batches per step (same maths, less memory).
    c.log_every = 50                      # Steps between metrics.jsonl lines.

    # Adafactor (optax), learning rate constant for `constant_steps`, then
    # base * sqrt(constant_steps / step), as in the paper.
    c.lr = ml_collections.ConfigDict(dict(base=3e-3, constant_steps=500, schedule="rsqrt"))
    c.optimizer = ml_collections.ConfigDict(dict(
        clipping_threshold=1.0,           # Adafactor's update clipping (T5X default).
        decay_rate=0.8,                   # Second-moment decay exponent (T5X default).
    ))
    c.label_smoothing = 0.0
    c.z_loss = 1e-4                       # T5X's auxiliary log(Z)^2 loss.

    c.vocab = ml_collections.ConfigDict(dict(path="demo_data/spm/demo.model"))
    c.data = ml_collections.ConfigDict(dict(
        dataset="coco35l",                # COCO-35L release layout (data/releases/coco35l.py).
        manual_dir="demo_data/coco35l",   # The release files (TFDS manual_dir).
        reader="tfds",                    # "tfds": the built data; "files": the release files.
        tfds_data_dir="",                 # '': demo_data/tfds, next to manual_dir.
        num_workers=config_dict.placeholder(int),  # Processes making batches; None: a core each.
        langs=("en", "es", "hi", "zh"),
        mixture="uniform",                # Languages sampled uniformly.
        prompt_template="<2{lang}>",      # The LangId string fed to the encoder.
        max_prompt_len=8,
        max_target_len=16,
        augment=False,
        corrupt_images="stop",            # A JPEG that does not decode: "stop" or "skip" it.
    ))
    c.model = ml_collections.ConfigDict(dict(
        image_size=64,
        fusion="pooled",                  # The paper: one pooled image vector + LangId tokens.
        dtype="float32",
        dropout=0.0,
        scan=False,
        remat=False,
        remat_policy="full",              # What remat keeps: "full" nothing, "dots" the matmuls.
        vit=dict(variant="mu/16", pool="map", posemb="learn",
                 width=128, depth=2, mlp_dim=256, num_heads=4),
        t5=dict(variant="t5-tiny", emb_dim=128, num_heads=4, head_dim=32, mlp_dim=256,
                num_encoder_layers=2, num_decoder_layers=2,
                vocab_size=config_dict.placeholder(int)),  # None: the vocabulary's, padded.
    ))
    c.init = ml_collections.ConfigDict(dict(mt5="", vit="", checkpoint=""))

    # Evaluators by name (evaluation/evaluators/), run every `every` steps, at step 0 and at
    # the end.
    c.evals = ml_collections.ConfigDict()
    c.evals.xm3600 = ml_collections.ConfigDict(dict(
        type="xm3600_cider",              # CIDEr-D on the XM3600-layout held-out split.
        data_dir="demo_data/xm3600",
        langs=("en", "es", "hi", "zh"),
        every=250,                        # Steps between evaluations.
        batch_size=64,
        max_decode_len=24,
        max_images=config_dict.placeholder(int),  # None: every image of the split.
    ))
    c.evals.coco_dev = ml_collections.ConfigDict(dict(
        type="coco_dev_cider",            # CIDEr-D on the COCO-35L dev split (Karpathy val).
        manual_dir="demo_data/coco35l",
        langs=("en", "es", "hi", "zh"),
        every=500,
        batch_size=64,
        max_decode_len=24,
        max_images=config_dict.placeholder(int),  # None: every image of the split.
    ))
    c.checkpoint = ml_collections.ConfigDict(dict(
        every=250, keep=2,
        best_metric="eval/cider_d/avg",   # checkpoints_best/ keeps the highest of this.
    ))
    c.mesh = ml_collections.ConfigDict(dict(
        data=-1,                          # Devices on the data axis; -1: what `model` leaves.
        model=1,                          # Devices on the model (tensor-parallel) axis.
        fsdp=False,                       # Also shard parameters' embed axis over `data`.
    ))
    return c.lock()
