"""configs/common.py's schema is the one definition of a run's fields.

Every config (the demo, the baselines and their smoke variants, the tests' tiny one) has
exactly its fields and sets those it leaves to them; training/run_config.py checks the
numbers of exactly those fields.
"""

import importlib

import pytest

from configs import common
from tests import tiny
from training import run_config

CONFIGS = [("demo", None)] + [(name, variant) for name in
                              ("bb", "bg", "lg", "bb_cc_pretrain", "bb_cc_finetune")
                              for variant in (None, "smoke")]
# Fields whose None means a default (the schema's comments say which).
NONE_MEANS_DEFAULT = {"data.num_workers", "model.vit.dropout"} | {
    f"evals.{name}.{field}" for name in ("xm3600", "coco_dev")
    for field in ("max_images", "beam_size", "alpha")} | {
    f"model.{tower}.{field}" for tower, fields in (
        ("vit", ("width", "depth", "mlp_dim", "num_heads")),
        ("t5", ("emb_dim", "num_heads", "head_dim", "mlp_dim", "num_encoder_layers",
                "num_decoder_layers", "vocab_size"))) for field in fields}
# Numbers checked elsewhere: the evaluators' by evaluation/evaluators, the mesh's by
# run_config._check_mesh, lr.constant_steps only where the schedule uses it.
CHECKED_ELSEWHERE = ("evals.", "mesh.", "lr.constant_steps")


def _types(config, prefix=""):
    """{dotted field: its type} of a ConfigDict (placeholders' declared types)."""
    out = {}
    for key in config:
        value = config[key]
        if hasattr(value, "keys"):
            out.update(_types(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = config.get_ref(key).get_type()
    return out


def _values(config, prefix=""):
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_values(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _config(name, variant):
    module = importlib.import_module(f"configs.{name}")
    return module.get_config() if name == "demo" else module.get_config(variant)


@pytest.mark.parametrize("name,variant", CONFIGS)
def test_a_config_has_the_schemas_fields_and_sets_its_choices(name, variant):
    config = _config(name, variant)
    assert config.is_locked
    with pytest.raises(AttributeError):
        config.no_such_field = 1
    values = _values(config.to_dict())
    assert set(values) == set(_types(common.schema()))
    assert {k for k, v in values.items() if v is None} <= NONE_MEANS_DEFAULT


def test_the_tiny_test_config_is_the_demos_shrunk():
    values = _values(tiny.tiny_config("data").to_dict())
    assert set(values) == set(_types(common.schema()))


def test_run_config_checks_the_numbers_of_exactly_the_schemas_fields():
    types = _types(common.schema())
    ranged = [key for key, _ in (*run_config.INTS, *run_config.OPTIONAL_INTS,
                                 *run_config.NUMBERS, *run_config.OPTIONAL_NUMBERS)]
    assert not set(ranged) - set(types), "ranges of fields the schema does not have"
    assert not set(run_config.MAY_CHANGE) - set(types)
    numbers = {key for key, kind in types.items() if kind in (int, float)
               and not key.startswith(CHECKED_ELSEWHERE)}
    assert numbers == set(ranged)
    optional = {key for key, _ in (*run_config.OPTIONAL_INTS, *run_config.OPTIONAL_NUMBERS)}
    assert optional == {key for key in NONE_MEANS_DEFAULT if not key.startswith("evals.")} \
        | {"optimizer.clipping_threshold", "model.dropout"}

