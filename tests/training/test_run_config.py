"""Tests of training/run_config.py: which config changes block a resume."""

import ml_collections
import pytest
from absl import flags
from ml_collections import config_flags

from training import run_config


def _config(**overrides):
    c = ml_collections.ConfigDict(dict(
        seed=0, total_steps=100, batch_size=8,
        model=dict(t5=dict(emb_dim=32), fusion="pooled"),
        evals=dict(xm3600=dict(every=10)), data=dict(langs=("en", "es"))))
    c.update_from_flattened_dict(overrides)
    return c


def test_a_saved_config_loads_back(tmp_path):
    run_config.save(str(tmp_path), _config())
    assert run_config.load(str(tmp_path))["model"]["t5"]["emb_dim"] == 32


def test_a_folder_without_a_config_loads_none(tmp_path):
    assert run_config.load(str(tmp_path / "nothing")) is None


def test_run_length_evaluation_remat_policy_may_change():
    saved = _config().to_dict()  # A config.json from before the remat_policy field.
    current = _config(**{"total_steps": 200, "evals.xm3600.every": 5})
    current.model.remat_policy = "dots"
    assert run_config.incompatible_changes(saved, current.to_dict()) == []


def test_a_list_for_a_tuple_is_no_change():
    saved = _config().to_dict()
    saved["data"]["langs"] = ["en", "es"]  # What JSON gives back.
    assert run_config.incompatible_changes(saved, _config().to_dict()) == []


def test_model_or_data_changes_are_named():
    saved = _config().to_dict()
    current = _config(**{"model.t5.emb_dim": 64, "data.langs": ("en",)})
    changes = run_config.incompatible_changes(saved, current.to_dict())
    assert changes == ["data.langs: ['en', 'es'] -> ['en']", "model.t5.emb_dim: 32 -> 64"]


def test_retired_fields_saved_with_what_runs_do_now_resume():
    saved = _config().to_dict()
    saved["data"].update(reader="files", mixture="uniform", augment=False)  # Older runs'.
    assert run_config.incompatible_changes(saved, _config().to_dict()) == []
    saved["data"].update(mixture="proportional", augment=True)  # Other examples then.
    assert run_config.incompatible_changes(saved, _config().to_dict()) == [
        "data.augment: True -> None", "data.mixture: 'proportional' -> None"]


def test_a_config_file_without_get_config_is_named(tmp_path):
    """Not "the config has no field 'config_config'" (ml_collections' module name)."""
    (tmp_path / "config.py").write_text("x = 1\n")
    flag_values = flags.FlagValues()
    # A flag name of its own: ml_collections imports the file as module "<flag>_config".
    config_flags.DEFINE_config_file("no_get_config", None, "", flag_values=flag_values)
    with pytest.raises(run_config.ConfigError, match=rf"^--no_get_config={tmp_path}/config.py: "
                                                     r"cannot load it: it defines no "
                                                     r"get_config\(\)$"):
        run_config.parse_flags(flag_values, ["x", f"--no_get_config={tmp_path}/config.py"],
                               config_flag="no_get_config")


def _parsed(*args):
    """The config of configs/demo.py with `args` (--config.x=y flags) as train.py parses them."""
    flag_values = flags.FlagValues()
    argv = ["train.py", "--config", "configs/demo.py", *args]
    config = config_flags.DEFINE_config_file("config", None, "", flag_values=flag_values,
                                             sys_argv=argv)
    run_config.parse_flags(flag_values, argv)
    return config.value


def test_a_list_field_given_as_a_b_c_is_a_tuple():
    assert _parsed("--config.data.langs=en,es,hi").data.langs == ("en", "es", "hi")


def test_a_list_field_given_apart_from_its_value_is_a_tuple():
    assert _parsed("--config.evals.xm3600.langs", "en,zh").evals.xm3600.langs == ("en", "zh")


def test_a_list_field_given_as_a_python_tuple_is_that_tuple():
    assert _parsed("--config.data.langs=('en', 'zh')").data.langs == ("en", "zh")


def test_a_list_flag_given_twice_keeps_the_last():
    assert _parsed("--config.data.langs=en,es", "--config.data.langs=hi").data.langs == ("hi",)
