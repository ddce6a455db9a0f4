"""Tests of training/metrics.py: metrics.jsonl survives a crash at any byte, an error is one line.

A crash while the trainer appends a record leaves metrics.jsonl cut at some byte; the next run (a
resume) must repair it and never hold two values of a step. A full disk (or any OSError) while
writing is a `MetricsWriteError` (one `error:` line), never a traceback.
"""

import errno
import json
import os
import re
import subprocess

import pytest

import errors
from tests import tiny
from tests.training.saved_state import read_metrics
from training import metrics
from training.metrics import MetricsFileError, MetricsLogger, MetricsWriteError

STEPS = 6


def _record(step):
    """A record like the trainer's: a train record, and an evaluation at even steps."""
    values = {"train/loss": 1.0 / step, "learning_rate": 0.003, "perf/step_time_s": 0.1}
    if step % 2 == 0:
        values["eval/cider_d/en"] = 0.25 * step
    return values


def _write_run(workdir, steps=STEPS):
    logger = MetricsLogger(str(workdir), total_steps=steps)
    for step in range(1, steps + 1):
        logger.log(step, _record(step))
    logger.close()
    return (workdir / "metrics.jsonl").read_bytes()


def _resume(workdir, start_step, steps=STEPS):
    """What train.py does on resuming at `start_step`: repair, then log the later steps."""
    logger = MetricsLogger(str(workdir), total_steps=steps, start_step=start_step)
    for step in range(start_step + 1, steps + 1):
        logger.log(step, _record(step))
    logger.close()


def _line_starts(data):
    return [0] + [i + 1 for i, byte in enumerate(data) if byte == ord("\n")][:-1]


def test_a_crash_at_every_byte_of_the_last_two_records_is_repaired(tmp_path, capsys):
    full = _write_run(tmp_path / "full")
    starts = _line_starts(full)
    assert len(starts) == STEPS
    expected = read_metrics(str(tmp_path / "full"))
    for cut in range(starts[-2], len(full)):
        whole = sum(1 for s in starts[1:] + [len(full)] if s <= cut)  # Records before the cut.
        complete_without_newline = full[cut - 1:cut] == b"}" and cut < len(full)
        survivors = whole + complete_without_newline
        # A resume from the checkpoint of the last whole record, or from an earlier one
        # (the records after it are dropped and logged again).
        for start_step in sorted({survivors, survivors - 1}):
            workdir = tmp_path / f"cut{cut}_{start_step}"
            workdir.mkdir()
            (workdir / "metrics.jsonl").write_bytes(full[:cut])
            _resume(workdir, start_step)
            out = capsys.readouterr().out
            where = f"cut at byte {cut}, resumed at step {start_step}"
            records = read_metrics(str(workdir))  # Parses, or raises.
            assert [r["step"] for r in records] == list(range(1, STEPS + 1)), where
            assert records == expected, where
            data = (workdir / "metrics.jsonl").read_bytes()
            assert data[:starts[start_step] if start_step < STEPS else len(full)] \
                == full[:starts[start_step] if start_step < STEPS else len(full)], where
            assert data.endswith(b"\n") and b"\n\n" not in data, where
            partial = b"" if complete_without_newline else full[starts[whole]:cut]
            damaged = workdir / "metrics.jsonl.damaged"
            if partial:
                assert damaged.read_bytes() == partial + b"\n", where
                warnings = [line for line in out.splitlines() if line.startswith("warning:")]
                assert len(warnings) == 1 and str(workdir / "metrics.jsonl") in warnings[0], \
                    (where, out)
                step_named = re.search(r"(of|after) step (\d+)", warnings[0])
                assert step_named, warnings[0]
            else:
                assert not damaged.exists(), where
                assert "warning" not in out, (where, out)


def test_a_cut_at_every_byte_names_a_step_whose_records_are_all_whole(tmp_path):
    """What `check_metrics_file` returns: a resumed run restores a checkpoint of that step or
    before, so the records it names whole must be, the cut ones logged again. A record cut
    before its step number is whole is taken for the lowest step it can be of."""
    logger = MetricsLogger(str(tmp_path / "full"), total_steps=4)
    for step in range(1, 5):  # A training record, and an evaluation one at even steps.
        logger.log(step, {"train/loss": 1.0 / step})
        if step % 2 == 0:
            logger.log(step, {"eval/cider_d/avg": 0.25 * step})
    logger.close()
    full = (tmp_path / "full" / "metrics.jsonl").read_bytes()
    ends = [i + 1 for i, byte in enumerate(full) if byte == ord("\n")]
    steps = [json.loads(line)["step"] for line in full.splitlines()]
    for cut in range(ends[1], len(full)):
        (tmp_path / "metrics.jsonl").write_bytes(full[:cut])
        whole_through = metrics.check_metrics_file(str(tmp_path))
        line = next(i for i, end in enumerate(ends) if cut < end)  # The line cut short.
        tail = full[ends[line - 1]:cut]
        if tail in (b"", full[ends[line - 1]:ends[line] - 1]):  # None cut, or only "\n".
            assert whole_through is None, cut
        elif re.match(rb'\{"step": \d+,', tail):
            assert whole_through == steps[line] - 1, cut
        else:
            assert whole_through in (steps[line] - 1, steps[line - 1] - 1), cut
            assert all(steps[i] > whole_through for i in range(line, len(steps))), cut


def test_a_last_line_lacking_only_its_newline_is_finished_in_place(tmp_path):
    full = _write_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_bytes(full[:-1])
    _resume(tmp_path, STEPS, steps=STEPS + 2)
    assert [r["step"] for r in read_metrics(str(tmp_path))] == list(range(1, STEPS + 3))
    # The next resume reads the file too (today it refuses the line holding two records).
    _resume(tmp_path, STEPS + 2, steps=STEPS + 2)
    assert (tmp_path / "metrics.jsonl").read_bytes()[:len(full)] == full


def test_two_records_on_one_line_are_split(tmp_path):
    full = _write_run(tmp_path)
    lines = full.splitlines(keepends=True)
    lines[2] = lines[2].rstrip(b"\n")  # A record appended onto a line lacking its newline.
    (tmp_path / "metrics.jsonl").write_bytes(b"".join(lines))
    _resume(tmp_path, STEPS)
    assert (tmp_path / "metrics.jsonl").read_bytes() == full


def test_records_after_the_resumed_checkpoint_are_dropped_once(tmp_path):
    """The README's promise: metrics.jsonl never holds two values of a step."""
    _write_run(tmp_path)
    _resume(tmp_path, 2)
    _resume(tmp_path, 4)
    steps = [r["step"] for r in read_metrics(str(tmp_path))]
    assert steps == list(range(1, STEPS + 1))
    # A run that restored no checkpoint starts the file afresh.
    MetricsLogger(str(tmp_path), total_steps=STEPS).close()
    assert read_metrics(str(tmp_path)) == []


def test_malformed_line_in_the_middle_is_an_error_that_changes_nothing(tmp_path):
    full = _write_run(tmp_path)
    lines = full.splitlines(keepends=True)
    lines.insert(2, b'{"step": 2, "train/lo\n')
    (tmp_path / "metrics.jsonl").write_bytes(b"".join(lines))
    with pytest.raises(MetricsFileError, match=r"metrics.jsonl:3: not a metrics record"):
        MetricsLogger(str(tmp_path), total_steps=STEPS, start_step=STEPS)
    assert (tmp_path / "metrics.jsonl").read_bytes() == b"".join(lines)
    assert not (tmp_path / "metrics.jsonl.damaged").exists()


def test_metrics_file_that_is_a_folder_is_one_error(tmp_path):
    (tmp_path / "metrics.jsonl").mkdir()
    message = r"metrics.jsonl is a folder, not a file"
    with pytest.raises(MetricsFileError, match=message):
        metrics.check_metrics_file(str(tmp_path))
    with pytest.raises(MetricsFileError, match=message):
        MetricsLogger(str(tmp_path), total_steps=STEPS, start_step=2)
    with pytest.raises(MetricsFileError, match=message):
        read_metrics(str(tmp_path))


# ------------------------------------------------------------ full disk ----
class _FullDisk:
    """A file whose writes fail with ENOSPC once `room` bytes have been written."""

    def __init__(self, file, room):
        self._file, self._room = file, room

    def write(self, data):
        if len(data) > self._room:
            self._file.write(data[:self._room])  # What a full disk takes of the write.
            self._file.flush()
            self._room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()


def _fill_disk(monkeypatch, suffix, room):
    """Makes files of training/metrics.py whose names end in `suffix` run out of room."""
    real_open = open

    def full_open(path, *args, **kwargs):
        file = real_open(path, *args, **kwargs)
        return _FullDisk(file, room) if str(path).endswith(suffix) else file

    monkeypatch.setattr(metrics, "open", full_open, raising=False)


def _log_onto_a_full_disk(tmp_path, monkeypatch, target):
    """Fault injection: training/metrics.py's `open` returns files that fill up. The logger
    and the error logging raised."""
    if target == "metrics.jsonl":  # Opened for each record: full from the second one on.
        logger = MetricsLogger(str(tmp_path), total_steps=STEPS)
        logger.log(1, _record(1))
        _fill_disk(monkeypatch, target, room=30)
    else:  # Opened once: full after the first record (and 10 bytes).
        _write_run(tmp_path / "sizes", steps=1)
        room = next((tmp_path / "sizes").glob("events.*")).stat().st_size + 10
        _fill_disk(monkeypatch, target, room=room)
        logger = MetricsLogger(str(tmp_path), total_steps=STEPS)
        logger.log(1, _record(1))
    with pytest.raises(MetricsWriteError) as caught:
        for step in range(2, STEPS + 1):
            logger.log(step, _record(step))
    return logger, caught


@pytest.mark.parametrize("target", ["metrics.jsonl", ".v2"])
def test_full_disk_while_logging_is_one_error(tmp_path, monkeypatch, target):
    logger, caught = _log_onto_a_full_disk(tmp_path, monkeypatch, target)
    name = "metrics.jsonl" if target == "metrics.jsonl" else "events.out.tfevents."
    assert re.fullmatch(rf"step 2: cannot write {re.escape(str(tmp_path))}/{name}\S* \(No space "
                        r"left on device\); .*", str(caught.value)), str(caught.value)
    assert isinstance(caught.value, errors.RunError)
    logger.close()


@pytest.mark.parametrize("target", ["metrics.jsonl", ".v2"])
def test_after_a_full_disk_while_logging_the_resume_repairs_the_file(tmp_path, monkeypatch,
                                                                      target):
    logger, _ = _log_onto_a_full_disk(tmp_path, monkeypatch, target)
    logger.close()  # Quietly: the run stops with the error above.
    monkeypatch.undo()
    _resume(tmp_path, 1)
    assert [r["step"] for r in read_metrics(str(tmp_path))] == list(range(1, STEPS + 1))


def test_full_disk_on_a_small_real_filesystem(tmp_path):
    """A 64 KiB tmpfs (mounted as root; skipped where `mount` is not allowed) fills up."""
    disk = tmp_path / "disk"
    with tiny.small_tmpfs(disk, "64k"):
        logger = MetricsLogger(str(disk), total_steps=10**6)
        with pytest.raises(MetricsWriteError, match=r"No space left on device"):
            for step in range(1, 10**6):
                logger.log(step, _record(step))
        logger.close()
        written = [r["step"] for r in read_metrics(str(disk))]
        assert written == list(range(1, len(written) + 1)) and len(written) > 10
        subprocess.run(["mount", "-o", "remount,size=1m", str(disk)], check=True)
        for path in disk.glob("events.out.tfevents.*"):
            path.unlink()  # Room for the resumed run's new event file.
        _resume(disk, written[-1], steps=written[-1] + 3)
        records = read_metrics(str(disk))
        assert [r["step"] for r in records] == list(range(1, written[-1] + 4))


@pytest.mark.slow  # train.py end to end (tests/conftest.py on main registers the marker).
def test_full_disk_while_writing_tensorboard_events_is_one_error_line(tiny_demo, tmp_path,
                                                                      monkeypatch):
    """train.py's command line end to end (in this process, `tiny.train_main`), its TensorBoard
    event file filling up after a few steps."""
    config = tiny.write_config_file(tmp_path / "config.py", tiny_demo, **{"evals.xm3600.every": 0})
    _fill_disk(monkeypatch, ".v2", room=600)
    workdir = tmp_path / "run"
    result = tiny.train_main(config, workdir)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, \
        result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr[-3000:]
    assert re.match(r"error: step \d+: cannot write .*/run/events\.out\.tfevents\.\S+ \(No space "
                    r"left on device\)", lines[0]), lines[0]
    steps = [json.loads(line)["step"] for line in (workdir / "metrics.jsonl").open()]
    assert steps, "metrics.jsonl is written before the events"


# ------------------------------------------------------ edited by hand ----
@pytest.mark.parametrize("edit, warning", [
    (lambda lines: lines[:3] + lines[4:], "no train record of step 4"),
    (lambda lines: lines[:4] + lines[3:], "step 4 twice (kept once)"),
    (lambda lines: lines[:3] + [lines[3].replace(b'"step": 4', b'"step": 40')] + lines[4:],
     "step 5 after step 40 (out of order); no train record of step 4"),
])
def test_a_record_missing_doubled_or_out_of_order_is_one_warning(tmp_path, capsys, edit, warning):
    full = _write_run(tmp_path)
    lines = full.splitlines(keepends=True)
    (tmp_path / "metrics.jsonl").write_bytes(b"".join(edit(lines)))
    capsys.readouterr()
    MetricsLogger(str(tmp_path), total_steps=STEPS, start_step=STEPS).close()
    assert capsys.readouterr().out.splitlines() == [
        f"warning: {tmp_path}/metrics.jsonl: {warning} (edited by hand?); the other records "
        f"are kept"]
    steps = [r["step"] for r in read_metrics(str(tmp_path))]
    assert steps == [step for step in range(1, STEPS + 1) if step != 4 or "twice" in warning]
    MetricsLogger(str(tmp_path), total_steps=STEPS, start_step=STEPS).close()
    assert ("twice" in capsys.readouterr().out) is False  # A doubled record is gone.


def test_a_damaged_file_that_is_a_folder_is_named_with_its_fix(tmp_path):
    full = _write_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_bytes(full[:-5])
    (tmp_path / "metrics.jsonl.damaged").mkdir()
    with pytest.raises(MetricsFileError, match=rf"^{tmp_path}/metrics.jsonl.damaged is a folder, "
                                               r"not a file: .*; move it away$"):
        _resume(tmp_path, STEPS - 1)
    assert (tmp_path / "metrics.jsonl").read_bytes() == full[:-5]  # Nothing changed.


def test_a_train_record_deleted_from_a_short_file_is_one_warning(tmp_path, capsys):
    """Three records, the middle one gone: no gap is seen twice, the run's log_every tells."""
    full = _write_run(tmp_path, steps=3)
    lines = full.splitlines(keepends=True)
    (tmp_path / "metrics.jsonl").write_bytes(lines[0] + b"".join(lines[2:]))
    capsys.readouterr()
    MetricsLogger(str(tmp_path), total_steps=3, start_step=3, log_every=1).close()
    assert capsys.readouterr().out.splitlines() == [
        f"warning: {tmp_path}/metrics.jsonl: no train record of step 2 (edited by hand?); the "
        f"other records are kept"]
