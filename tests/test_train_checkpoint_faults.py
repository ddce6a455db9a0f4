"""Damaged checkpoints and a damaged config.json, as the command line shows them: one line each,
none of the libraries' logs (orbax, absl, asyncio, TensorStore's spec dumps) unless `--verbosity`
asks for them. The command line runs in the test process (`tiny.train_main`).
"""

import json
import pathlib
import re
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests import tiny
from tests.training.saved_state import (
    assert_same_params,
    read_metrics,
    read_saved_state,
    truncate_largest_data_file,
)
from training import checkpointing, run_config


def _main(config_file, workdir, *args):
    """train.py's command line on the shared config file, without in-loop evaluations."""
    return tiny.train_main(config_file, workdir, "--config.evals.xm3600.every=0", *args)


@pytest.fixture
def workdir(four_step_run, tmp_path):
    """A copy of the shared four-step run (checkpoints 2 and 4), for a test that harms it."""
    return pathlib.Path(four_step_run.copy_to(tmp_path / "run"))


def _lines(result):
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


def _remove_ocdbt_process_0(step_dir):
    shutil.rmtree(step_dir / "default" / "ocdbt.process_0")


DAMAGES = {"truncated OCDBT file": truncate_largest_data_file,
           "missing ocdbt.process_0": _remove_ocdbt_process_0}


# ----------------------------------------------------- damaged checkpoints ----
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_newest_checkpoint_is_one_warning_line(config_file, workdir, damage):
    DAMAGES[damage](workdir / "checkpoints" / "4")
    result = _main(config_file, workdir, "--config.total_steps=5")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = _lines(result)
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == 1, lines[:40]
    assert "checkpoints/4 (step 4) is damaged" in warnings[0]
    assert "See full TensorStore details" not in warnings[0]
    # The rest: the resumption, the compile and the progress lines.
    others = [line for line in lines if not line.startswith(("warning: ", "step ", "Resuming",
                                                             "Compiled the train step"))]
    assert not others, others[:40]


def test_no_readable_checkpoint_is_the_only_line(config_file, workdir):
    truncate_largest_data_file(workdir / "checkpoints" / "4")
    _remove_ocdbt_process_0(workdir / "checkpoints" / "2")
    result = _main(config_file, workdir, "--config.total_steps=6")
    assert result.returncode == 2, result.stderr[-3000:]
    lines = _lines(result)
    assert len(lines) == 1, lines[:40]
    assert re.match(r"error: no checkpoint of the run can be read: checkpoint .*/4 \(step 4\) "
                    r"is damaged.*/2 \(step 2\) is damaged", lines[0]), lines
    assert checkpointing.steps(str(workdir)) == [2, 4]  # Nothing moved.
    assert not (workdir / "checkpoints_damaged").exists()


def test_checkpoints_being_a_file_is_the_only_line(config_file, workdir):
    shutil.rmtree(workdir / "checkpoints")
    (workdir / "checkpoints").write_text("not a folder")
    result = _main(config_file, workdir, "--config.total_steps=6")
    assert result.returncode == 2, result.stderr[-3000:]
    lines = _lines(result)
    assert len(lines) == 1, lines[:40]
    assert lines[0].startswith("error: ") and "checkpoints" in lines[0] \
        and "not a folder" in lines[0], lines
    assert (workdir / "checkpoints").read_text() == "not a folder"


def test_verbosity_brings_the_library_logs_back(config_file, workdir):
    truncate_largest_data_file(workdir / "checkpoints" / "4")
    result = _main(config_file, workdir, "--config.total_steps=5", "--verbosity=0")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(_lines(result)) > 20


def _nan_in_params(workdir, step):
    """Rewrites checkpoint `step` with a NaN in its parameters, as orbax writes one: damage
    that reads back without an error (as flipped bits can)."""
    _, state = read_saved_state(str(workdir), step)
    first = jax.tree.leaves(state["params"])[0]
    state["params"] = jax.tree.map(lambda x: x.at[(0,) * x.ndim].set(np.nan) if x is first
                                   else x, state["params"])
    shutil.rmtree(workdir / "checkpoints" / str(step))
    with checkpointing.manager(str(workdir), asynchronous=False) as mngr:
        mngr.save(step, args=ocp.args.StandardSave(state))


def test_a_checkpoint_whose_first_step_is_not_finite_is_set_aside(config_file, workdir,
                                                                    four_step_run):
    _nan_in_params(workdir, 4)
    result = _main(config_file, workdir, "--config.total_steps=5")
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in _lines(result) if line.startswith("warning: ")]
    assert warnings == [
        f"warning: checkpoint {workdir}/checkpoints/4 (step 4) gives step 5: non-finite "
        f"train/loss=nan, train/grad_norm=nan as the first step trained from it (its files are "
        f"damaged?); moved it to {workdir}/checkpoints_damaged/4 and resuming from step 2"]
    assert checkpointing.steps(str(workdir)) == [4, 5]  # 4 trained again, as before.
    assert_same_params(read_saved_state(str(workdir), 4)[1],
                       four_step_run.state(4))
    assert [r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r] == [1, 2, 3, 4, 5]
    # With no older checkpoint, the run stops naming it.
    _nan_in_params(workdir, 5)
    shutil.rmtree(workdir / "checkpoints" / "4")
    result = _main(config_file, workdir, "--config.total_steps=6")
    assert result.returncode == 2, result.stderr[-3000:]
    assert _lines(result)[-1] == (
        f"error: checkpoint {workdir}/checkpoints/5 (step 5) gives step 6: non-finite "
        f"train/loss=nan, train/grad_norm=nan as the first step trained from it (its files are "
        f"damaged?); no older checkpoint is kept: move it away to start afresh, or use another "
        f"--workdir")
    assert checkpointing.steps(str(workdir)) == [5]


@pytest.mark.parametrize("damage", ["metrics truncated", "missing"])
def test_a_lost_best_checkpoint_is_saved_again_from_its_step(config_file, workdir,
                                                             four_step_run, damage):
    best = workdir / "checkpoints_best" / "2"
    if damage == "missing":  # As a save that failed after its step's checkpoint was saved.
        shutil.rmtree(best)
    else:
        (best / "metrics" / "metrics").write_text('{"eva')
    result = _main(config_file, workdir, "--config.total_steps=5")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = _lines(result)
    warnings = [line for line in lines if line.startswith("warning: ")]
    if damage != "missing":
        assert len(warnings) == 1, lines
        assert warnings[0].startswith(f"warning: best checkpoint {best} (step 2) is damaged "
                                      f"(its metrics: "), lines
        assert warnings[0].endswith(f"moved it to {workdir}/checkpoints_damaged/best-2 and the "
                                    f"best checkpoint is saved again when its step's "
                                    f"checkpoint is kept"), lines
    else:
        assert not warnings, lines
    assert any(re.fullmatch(rf"Saving the best checkpoint of step 2 \(eval/cider_d/avg=[\d.e-]+"
                            rf"\) again: {workdir}/checkpoints_best lacks it", line)
               for line in lines), lines
    assert checkpointing.steps(str(workdir), best=True) == [2]
    expected = four_step_run.state(2)
    restored, _ = checkpointing.restore(str(workdir), expected["params"], step="best")
    assert_same_params({"params": restored}, expected)


# ------------------------------------------------------------- config.json ----
def test_missing_config_json_beside_checkpoints_is_an_error(config_file, workdir):
    (workdir / "config.json").unlink()
    result = _main(config_file, workdir, "--config.total_steps=6", "--config.seed=7")
    assert result.returncode == 2, result.stderr[-3000:]
    lines = _lines(result)
    assert len(lines) == 1, lines[:40]
    assert f"{workdir}/config.json" in lines[0] and "--allow_config_change" in lines[0], lines
    assert not (workdir / "config.json").exists()  # Nothing written.
    assert checkpointing.steps(str(workdir)) == [2, 4]
    # Adopting the command line's config explicitly resumes, and saves it.
    adopted = _main(config_file, workdir, "--config.total_steps=6",
                    "--config.seed=7", "--allow_config_change")
    assert adopted.returncode == 0, adopted.stderr[-3000:]
    assert json.loads((workdir / "config.json").read_text())["seed"] == 7
    assert checkpointing.steps(str(workdir))[-1] == 6


def test_an_allowed_config_change_is_a_plain_warning_line(config_file, workdir):
    result = _main(config_file, workdir, "--config.seed=7", "--allow_config_change")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = _lines(result)
    assert lines[0] == "warning: config changed since the checkpoint (allowed): seed: 0 -> 7"
    assert lines[1].startswith(f"Resuming {workdir} at step 4 of 4"), lines
    assert len(lines) == 2, lines  # No absl-prefixed log line.


def test_truncated_config_json_is_one_line_naming_it(config_file, workdir):
    text = (workdir / "config.json").read_text()
    (workdir / "config.json").write_text(text[: len(text) // 2])
    result = _main(config_file, workdir, "--config.total_steps=6")
    assert result.returncode == 2, result.stderr[-3000:]
    lines = _lines(result)
    assert len(lines) == 1, lines[:40]
    assert f"{workdir}/config.json" in lines[0] and "line " in lines[0] \
        and "column " in lines[0] and "--allow_config_change" in lines[0], lines
    assert (workdir / "config.json").read_text() == text[: len(text) // 2]


def test_load_names_the_position_in_the_file(tmp_path):
    (tmp_path / "config.json").write_text('{"seed": 1,\n "model": ')
    with pytest.raises(run_config.SavedConfigError,
                       match=r"config.json: not valid JSON \(line 2 column 11: "):
        run_config.load(str(tmp_path))


def test_load_refuses_a_config_not_an_object(tmp_path):
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(run_config.SavedConfigError, match=r"config.json: not a JSON object"):
        run_config.load(str(tmp_path))


def test_load_of_a_folder_without_a_config_is_none(tmp_path):
    assert run_config.load(str(tmp_path / "none")) is None


# ------------------------------------------------------------- metrics.jsonl ----
def test_metrics_cut_before_every_kept_checkpoint_says_which_records_are_lost(config_file, workdir):
    """A cut by hand deep in the file (a crash cuts the newest record alone): no checkpoint
    is old enough to log the cut steps again, so the run resumes and says what is lost."""
    path = workdir / "metrics.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:data.index(b'{"step": 1,') + 20])  # Inside step 1's first record.
    result = _main(config_file, workdir, "--config.total_steps=5")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = _lines(result)
    assert any(line.startswith("warning: ") and "dropped a record cut short" in line
               for line in lines), lines
    assert (f"warning: {workdir}/metrics.jsonl holds whole records only to step 0 and no "
            f"checkpoint of that step or before is kept; resuming from step 4, so the records "
            f"of steps 1-4 are lost") in lines, lines
    assert any(line.startswith(f"Resuming {workdir} at step 4 of 5") for line in lines), lines


@pytest.mark.parametrize("how", ["removed", "emptied"])
def test_metrics_gone_beside_checkpoints_is_a_warning(config_file, workdir, how):
    path = workdir / "metrics.jsonl"
    path.unlink() if how == "removed" else path.write_bytes(b"")
    result = _main(config_file, workdir, "--config.total_steps=5")
    assert result.returncode == 0, result.stderr[-3000:]
    warning = [line for line in _lines(result) if line.startswith("warning: ")]
    assert warning == [f"warning: {path} is {'gone' if how == 'removed' else 'empty'} though "
                       f"the run has checkpoints: the records of the steps it resumes after "
                       f"are lost (a run writes it from its first step; it was removed or "
                       f"emptied since)"], warning
