"""evaluation.evaluate beside a running trainer: a checkpoint deleted under it (the trainer
keeps only the newest) is replaced by the newest remaining, in one line, not called damaged."""

import shutil

import pytest

from data import tokenizer
from evaluation import evaluate
from training import checkpointing
from training import run as run_lib


@pytest.fixture(scope="module")
def run(two_step_run):
    """(folder, config) of a 2-step tiny run with checkpoints at steps 1 and 2: the test run's
    shared `two_step_run`, which each test copies before deleting in it."""
    return two_step_run.workdir, two_step_run.config()


def _deleting_the_newest_while_reading(run, tmp_path, monkeypatch, *, without_step_1=False):
    """A copy of the run whose next checkpoint read deletes its folder first, as the trainer
    would: (workdir, vocabulary, [deleted folder])."""
    workdir = tmp_path / "run"
    shutil.copytree(run[0], workdir)
    if without_step_1:
        shutil.rmtree(workdir / "checkpoints" / "1")
    real_restore = checkpointing._restore
    deleted = []

    def restore(path, target, **options):
        if not deleted:
            deleted.append(path)
            shutil.rmtree(path)
        return real_restore(path, target, **options)

    monkeypatch.setattr(checkpointing, "_restore", restore)
    return workdir, tokenizer.get_vocabulary(run[1].vocab.path), deleted


def test_a_checkpoint_deleted_while_read_is_replaced_by_the_newest_left(run, tmp_path,
                                                                       monkeypatch, capsys):
    workdir, vocab, deleted = _deleting_the_newest_while_reading(run, tmp_path, monkeypatch)
    _, step = evaluate._restore(run_lib.Run(str(workdir), run[1], vocab), None)
    assert deleted == [f"{workdir}/checkpoints/2"]
    assert step == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "note: checkpoint step 2 was deleted while it was read (by the trainer, which keeps the "
        "newest); reading step 1 instead"]
    assert "Traceback" not in captured.err and "damaged" not in captured.err


@pytest.mark.parametrize("step, without_step_1, message", [
    (2, False, r"checkpoints/2 \(step 2\)"),  # the step asked for
    (None, True, r"no checkpoint in .*/checkpoints: train "),  # the last one
], ids=["an_asked_for_step", "the_last_one"])
def test_deleted_while_read_with_no_other_to_read_is_an_error(run, tmp_path, monkeypatch, step,
                                                              without_step_1, message):
    workdir, vocab, _ = _deleting_the_newest_while_reading(run, tmp_path, monkeypatch,
                                                           without_step_1=without_step_1)
    with pytest.raises(evaluate.UsageError, match=message):
        evaluate._restore(run_lib.Run(str(workdir), run[1], vocab), step)
