"""evaluation.evaluate beside a running trainer: a checkpoint deleted under it (the trainer
keeps only the newest) is replaced by the newest remaining, in one line, not called damaged.
"""

import shutil

import pytest

from data import tokenizer
from evaluation import evaluate
from training import checkpointing


@pytest.fixture(scope="module")
def run(two_step_run):
    """(folder, config) of a 2-step tiny run with checkpoints at steps 1 and 2: the test run's
    shared `two_step_run`, which each test copies before deleting in it."""
    return two_step_run.workdir, two_step_run.config()


def _deleting_the_newest_while_reading(monkeypatch):
    """Makes the next read of a checkpoint delete its folder first, as the trainer would."""
    real_restore = checkpointing._restore_params
    deleted = []

    def restore(path, target):
        if not deleted:
            deleted.append(path)
            shutil.rmtree(path)
        return real_restore(path, target)

    monkeypatch.setattr(checkpointing, "_restore_params", restore)
    return deleted


def test_a_checkpoint_deleted_while_read_is_replaced_by_the_newest_left(run, tmp_path,
                                                                       monkeypatch, capsys):
    workdir = tmp_path / "run"
    shutil.copytree(run[0], workdir)
    vocab = tokenizer.get_vocabulary(run[1].vocab.path)
    deleted = _deleting_the_newest_while_reading(monkeypatch)
    _, _, step = evaluate._restore(run[1], str(workdir), vocab, None)
    assert deleted == [f"{workdir}/checkpoints/2"]
    assert step == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "note: checkpoint step 2 was deleted while it was read (by the trainer, which keeps the "
        "newest); reading step 1 instead"]
    assert "Traceback" not in captured.err and "damaged" not in captured.err


def test_an_asked_for_step_deleted_while_read_is_an_error(run, tmp_path, monkeypatch):
    workdir = tmp_path / "run"
    shutil.copytree(run[0], workdir)
    vocab = tokenizer.get_vocabulary(run[1].vocab.path)
    _deleting_the_newest_while_reading(monkeypatch)
    with pytest.raises(evaluate.UsageError, match=r"checkpoints/2 \(step 2\)"):
        evaluate._restore(run[1], str(workdir), vocab, 2)


def test_the_last_one_deleted_while_read_says_there_is_none(run, tmp_path, monkeypatch):
    workdir = tmp_path / "run"
    shutil.copytree(run[0], workdir)
    shutil.rmtree(workdir / "checkpoints" / "1")
    vocab = tokenizer.get_vocabulary(run[1].vocab.path)
    _deleting_the_newest_while_reading(monkeypatch)
    with pytest.raises(evaluate.UsageError, match=r"no checkpoint in .*/checkpoints: train "):
        evaluate._restore(run[1], str(workdir), vocab, None)
