"""Ctrl-C to the process group while the input workers start or work: the trainer's one line
and exit 130, nothing added by the workers (no traceback, no warning), none outliving it."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STOPPED = "Ctrl-C: stopped before the first training step (nothing to save)."


def _script(demo_dir, then):
    return textwrap.dedent(f"""
        import sys, time
        from training import preemption
        preemption.install()
        import ml_collections
        from data import pipeline, tokenizer
        config = ml_collections.ConfigDict(dict(
            dataset="coco35l", manual_dir={str(demo_dir / "coco35l")!r}, langs=("en", "zh"),
            max_prompt_len=4, max_target_len=16, num_workers=2))
        vocab = tokenizer.get_vocabulary({str(demo_dir / "spm" / "demo.model")!r})
        batches = pipeline.train_iterator(config, vocab, global_batch_size=4, image_size=32,
                                          seed=0)
        {then}
        print("ready", flush=True)
        time.sleep(60)
    """)


def _session_processes(sid):
    """The pids of the live processes of session `sid` (Linux /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry))
    return pids


@pytest.mark.parametrize("then", [
    "",  # The workers are still starting (importing) when the signal comes.
    "next(batches)",  # They are making batches, some in shared memory.
])
def test_ctrl_c_to_the_group_is_the_trainers_one_line(demo_dir, then):
    proc = subprocess.Popen([sys.executable, "-c", _script(demo_dir, then)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    assert proc.stdout.readline() == "ready\n"
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert out.splitlines() == [STOPPED], out
    deadline = time.monotonic() + 5
    while _session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # The workers follow their parent within 0.1 s.
    assert not _session_processes(proc.pid)
