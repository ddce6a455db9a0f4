"""Every value of a training config is checked before any work (training/run_config.check):
each numeric field out of range (NaN and inf included) and each unknown choice is one error."""

import importlib
import math

import ml_collections
import pytest

from configs import demo
from training import run_config

NAN, INF = math.nan, math.inf
BAD_VALUES = [
    # (field, bad value, words of the message)
    ("seed", -1, "config.seed=-1; expected an integer >= 0"),
    ("total_steps", -3, "config.total_steps=-3; expected an integer >= 0"),
    ("total_steps", 1e5, "config.total_steps=100000.0; expected an integer >= 0"),
    ("batch_size", 0, "config.batch_size=0; expected an integer >= 1"),
    ("grad_accum_steps", 0, "config.grad_accum_steps=0; expected an integer >= 1"),
    ("log_every", -1, "config.log_every=-1; expected an integer >= 0"),
    ("checkpoint.every", -1, "config.checkpoint.every=-1; expected an integer >= 0"),
    ("checkpoint.keep", 0, "config.checkpoint.keep=0; expected an integer >= 1"),
    ("data.max_prompt_len", 0, "config.data.max_prompt_len=0; expected an integer in [1, 512]"),
    ("data.max_target_len", 0, "config.data.max_target_len=0; expected an integer in [1, 1024]"),
    ("data.max_target_len", 1000000,
     "config.data.max_target_len=1000000; expected an integer in [1, 1024]"),
    ("data.num_workers", -1, "config.data.num_workers=-1; expected an integer >= 0"),
    ("model.image_size", 0, "config.model.image_size=0; expected an integer >= 1"),
    *((f"model.vit.{k}", 0, f"config.model.vit.{k}=0; expected an integer >= 1")
      for k in ("width", "depth", "mlp_dim", "num_heads")),
    *((f"model.t5.{k}", 0, f"config.model.t5.{k}=0; expected an integer >= 1")
      for k in ("emb_dim", "num_heads", "head_dim", "mlp_dim", "num_encoder_layers",
                "num_decoder_layers", "vocab_size")),
    ("lr.base", INF, "config.lr.base=inf; expected a finite number > 0"),
    ("lr.base", NAN, "config.lr.base=nan; expected a finite number > 0"),
    ("lr.base", 0.0, "config.lr.base=0.0; expected a finite number > 0"),
    ("lr.base", -3e-3, "config.lr.base=-0.003; expected a finite number > 0"),
    ("lr.constant_steps", 0, "config.lr.constant_steps=0; expected an integer >= 1"),
    ("lr.schedule", "cosine", "config.lr.schedule='cosine'; known: rsqrt, constant"),
    ("optimizer.decay_rate", 0.0, "config.optimizer.decay_rate=0.0; expected a finite number > 0"),
    ("optimizer.decay_rate", NAN, "config.optimizer.decay_rate=nan; expected a finite number"),
    ("optimizer.clipping_threshold", 0.0, "config.optimizer.clipping_threshold=0.0; expected a "
                                          "finite number > 0"),
    ("optimizer.clipping_threshold", INF, "config.optimizer.clipping_threshold=inf"),
    ("label_smoothing", 1.0, "config.label_smoothing=1.0; expected a finite number in [0, 1)"),
    ("label_smoothing", -0.1, "config.label_smoothing=-0.1; expected a finite number in [0, 1)"),
    ("z_loss", -1e-4, "config.z_loss=-0.0001; expected a finite number >= 0"),
    ("z_loss", INF, "config.z_loss=inf; expected a finite number >= 0"),
    ("model.dropout", 1.5, "config.model.dropout=1.5; expected a finite number in [0, 1)"),
    ("model.dropout", 1.0, "config.model.dropout=1.0; expected a finite number in [0, 1)"),
    ("model.dropout", -0.1, "config.model.dropout=-0.1; expected a finite number in [0, 1)"),
    ("model.dropout", NAN, "config.model.dropout=nan; expected a finite number in [0, 1)"),
    ("mesh.data", 0, "config.mesh.data=0; expected an integer >= 1, or -1"),
    ("mesh.model", -2, "config.mesh.model=-2; expected an integer >= 1, or -1"),
    ("data.prompt_template", "<2xx>", "config.data.prompt_template='<2xx>': prompt template "
                                      "'<2xx>' has no '{lang}' field"),
    ("data.prompt_template", "<2{lang}{x}>", "config.data.prompt_template='<2{lang}{x}>': "
                                             "unknown field 'x'"),
    ("data.prompt_template", "{lang", "config.data.prompt_template='{lang'"),
    ("data.dataset", "coco", "config.data.dataset='coco'; known: coco35l, cc3m35l"),
    ("data.corrupt_images", "ignore", "config.data.corrupt_images='ignore'; known: stop, skip"),
    ("model.dtype", "float17", "config.model.dtype='float17'; known: float32, bfloat16"),
    ("model.remat_policy", "dot", "config.model.remat_policy='dot'; known: full, dots"),
    ("model.fusion", "concat", "config.model.fusion='concat'; known: pooled, patches"),
    ("model.scan", 1, "config.model.scan=1; expected True or False"),
    ("vocab.path", None, "config.vocab.path=None; expected a string"),
    ("data.langs", "en", "config.data.langs='en'; expected a list of strings"),
    ("evals.xm3600.every", -1, "config.evals.xm3600.every=-1; expected an integer >= 0"),
    ("evals.xm3600.batch_size", 0, "config.evals.xm3600.batch_size=0; expected an integer >= 1"),
    ("evals.coco_dev.max_decode_len", 0,
     "config.evals.coco_dev.max_decode_len=0; expected an integer >= 1"),
    ("evals.xm3600.max_images", 0,
     "config.evals.xm3600.max_images=0; expected an integer >= 1"),
]


def _with(config, **fields):
    """A copy of `config` with dotted `fields` set, whatever their types (as a config file
    could write them)."""
    tree = config.to_dict()
    for key, value in fields.items():
        *parents, name = key.split(".")
        node = tree
        for parent in parents:
            node = node[parent]
        node[name] = value
    return ml_collections.ConfigDict(tree)


@pytest.mark.parametrize("field,value,message", BAD_VALUES,
                         ids=[f"{f}={v}" for f, v, _ in BAD_VALUES])
def test_a_value_out_of_range_is_one_error_naming_the_field(field, value, message):
    with pytest.raises(run_config.ConfigError) as caught:
        run_config.check(_with(demo.get_config(), **{field: value}))
    assert message in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


def test_both_mesh_axes_taking_the_rest_or_a_tfds_data_dir_file_is_an_error(tmp_path):
    with pytest.raises(run_config.ConfigError, match=r"config.mesh.data and config.mesh.model "
                                                     r"are both -1"):
        run_config.check(_with(demo.get_config(), **{"mesh.data": -1, "mesh.model": -1}))
    (tmp_path / "tfds").write_text("not a folder")
    with pytest.raises(run_config.ConfigError, match=r"config.data.tfds_data_dir=.*/tfds' is a "
                                                     r"file, not a folder"):
        run_config.check(_with(demo.get_config(), **{"data.tfds_data_dir": str(tmp_path / "tfds")}))


@pytest.mark.parametrize("fields", [
    {"optimizer.clipping_threshold": None},  # No clipping.
    {"data.num_workers": 0, "model.dropout": 0.0, "label_smoothing": 0.0, "z_loss": 0.0},
    {"lr.schedule": "constant", "lr.constant_steps": 0},  # Unused by "constant".
    {"mesh.data": 1, "mesh.model": -1},
    {"data.prompt_template": "{lang}: "},
])
def test_values_at_the_ends_of_their_ranges_pass(fields):
    run_config.check(_with(demo.get_config(), **fields))


@pytest.mark.parametrize("name", ["bb", "bg", "lg", "bb_cc_pretrain", "bb_cc_finetune"])
@pytest.mark.parametrize("variant", ["", "smoke"])
def test_every_shipped_config_passes(name, variant):
    run_config.check(importlib.import_module(f"configs.{name}").get_config(variant))


class _Vocab:
    """A vocabulary of `vocab_size` ids whose pieces are characters."""
    vocab_size = 100

    def encode(self, text):
        return [ord(c) % self.vocab_size for c in text]


def test_a_vocab_size_below_the_vocabulary_or_a_prompt_over_max_prompt_len_is_an_error():
    config = _with(demo.get_config(), **{"model.t5.vocab_size": 10})
    with pytest.raises(run_config.ConfigError, match=r"config.model.t5.vocab_size=10 is smaller "
                                                     r"than the vocabulary .*demo.model \(100 "
                                                     r"ids\)"):
        run_config.check_vocab(config, _Vocab())
    run_config.check_vocab(_with(config, **{"model.t5.vocab_size": 100}), _Vocab())
    run_config.check_vocab(_with(config, **{"model.t5.vocab_size": None}), _Vocab())
    config = _with(demo.get_config(), **{"data.max_prompt_len": 5})  # "<2en>" + EOS: 6.
    with pytest.raises(run_config.ConfigError, match=r"config.data.max_prompt_len=5 is too short "
                                                     r"for the prompt '<2en>' \(6 tokens with "
                                                     r"EOS\)"):
        run_config.check_vocab(config, _Vocab())
    run_config.check_vocab(_with(config, **{"data.max_prompt_len": 6}), _Vocab())
