"""training/run_config.FIELDS is the one definition of a run's fields.

Every config (the demo, the baselines and their smoke variants, the tests' tiny one) has
exactly its fields and sets those it leaves unset unless their None means a default; every
number has a range unless something else checks it.
"""

import importlib

import pytest

from tests import tiny
from training import run_config

CONFIGS = [("demo", None)] + [(name, variant) for name in
                              ("bb", "bg", "lg", "bb_cc_pretrain", "bb_cc_finetune")
                              for variant in (None, "smoke")]
# Numbers checked elsewhere: the evaluators' by evaluation/evaluators, the mesh's by
# run_config._check_mesh.
CHECKED_ELSEWHERE = (".beam_size", ".alpha")  # model/decode.Decoding checks them.


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
def test_a_config_is_locked(name, variant):
    config = _config(name, variant)
    assert config.is_locked
    with pytest.raises(AttributeError):
        config.no_such_field = 1


@pytest.mark.parametrize("name,variant", CONFIGS)
def test_a_config_has_the_schemas_fields(name, variant):
    values = _values(_config(name, variant).to_dict())
    assert set(values) == set(run_config.BY_NAME)


@pytest.mark.parametrize("name,variant", CONFIGS)
def test_a_config_leaves_only_optional_fields_unset(name, variant):
    values = _values(_config(name, variant).to_dict())
    assert {k for k, v in values.items() if v is None} <= {
        f.name for f in run_config.FIELDS if f.has("optional")}


def test_the_tiny_test_config_is_the_demos_shrunk():
    assert set(_values(tiny.tiny_config("data").to_dict())) == set(run_config.BY_NAME)


def test_every_number_has_a_range_unless_checked_elsewhere():
    schema = run_config.schema()
    for field in run_config.FIELDS:
        *parents, key = field.name.split(".")
        node = schema
        for parent in parents:
            node = node[parent]
        kind = node.get_ref(key).get_type()
        assert kind == (field.default if isinstance(field.default, type) else
                        type(field.default)), field.name
        if kind in (int, float) and not field.name.endswith(CHECKED_ELSEWHERE):
            assert isinstance(field.values, run_config.Range), field.name
        assert set(field.flags.split()) <= {"optional", "auto", "fixed", "step"}, field.name
