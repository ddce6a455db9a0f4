"""benchmarks/accelerator_report.py --tiny: every section runs, without TensorFlow, and adds up.

One run on tiny shapes (once per test run) in a subprocess where `import tensorflow` fails (so
the train_step.py and decode_speed.py it runs start without it too). Its JSON holds every
section, and the figures agree: throughput with step time, MFU with the analytic FLOPs, the
warm launch with the cold one's cache.
"""

import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

from benchmarks import accelerator_report
from tests import tiny

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_report(folder):
    os.makedirs(folder)
    env = tiny.no_tensorflow_env(os.path.join(folder, "no_tensorflow"))
    path = os.path.join(folder, "report.json")
    result = subprocess.run(
        [sys.executable, "benchmarks/accelerator_report.py", "--tiny", "--json", path],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    with open(os.path.join(folder, "stdout.txt"), "w", encoding="utf-8") as f:
        f.write(result.stdout)


@pytest.fixture(scope="module")
def report(built_once):
    """(stdout, figures) of one run per test run, whichever workers run the tests."""
    folder = pathlib.Path(built_once("accelerator_report", _run_report))
    return (folder / "stdout.txt").read_text(), json.loads((folder / "report.json").read_text())


def _check_step(figures):
    assert figures["step_s"] > 0
    assert math.isclose(figures["examples_per_s"], figures["batch_size"] / figures["step_s"])
    assert figures["computed_tokens_per_s"] >= figures["real_tokens_per_s"] > 0
    for kind, per_example in (("computed", "per_example"), ("useful", "per_example_useful")):
        achieved = figures["batch_size"] * figures["flops"][per_example] / figures["step_s"]
        for name, mfu in figures["flops"][f"mfu_{kind}"].items():
            assert math.isclose(mfu, achieved / figures["peaks"][name]), (kind, name)
            assert 0 < mfu < 1.5, (kind, name, mfu)
    assert figures["flops"]["per_example_useful"] <= figures["flops"]["per_example"]


def test_the_table_holds_every_section(report):
    stdout, _ = report
    table = stdout.split("\n\n")[0].splitlines()
    assert table[:2] == ["| section | setting | result |", "| --- | --- | --- |"]
    sections = {line.split(" | ")[0].lstrip("| ") for line in table[2:]}
    # No "kernels" row: the CPU's trace has no device.
    assert sections == {"device", "matmul", "target length", "launch to first step",
                        "optimizer", "train step", "decoding", "attention fwd+bwd"}


def test_the_json_after_the_table_is_the_figures(report):
    stdout, figures = report
    assert json.loads(stdout.split("\n\n", 1)[1]) == {
        k: v for k, v in figures.items() if k != "table"}


def test_no_section_fails(report):
    _, figures = report
    assert figures["errors"] == {}


def test_launch_compiles_cold_then_loads_warm(report):
    launch = report[1]["launch"]
    cold, warm = launch["cold"]["figures"], launch["warm"]["figures"]
    assert cold["compile_step"]["cache_hit"] is False
    assert warm["compile_step"]["cache_hit"] is True
    assert 0 < warm["compile_step"]["compile_s"] < cold["compile_step"]["compile_s"]
    for figures in (cold, warm):
        assert figures["launch_s"] > figures["compile_step"]["compile_s"]


def test_train_steps_add_up(report):
    figures = report[1]
    suggested = figures["target_len"]["suggested"]
    assert suggested % 8 == 0 and suggested >= figures["target_len"]["p99_9"]
    bb = [e["figures"] for e in figures["bb"]]
    # --tiny: one length (the suggested one) and one remat policy, the launch's; padded, then
    # packed (the launch's).
    assert [(f["remat"], f["max_target_len"], f["pack"]) for f in bb] == [
        (True, suggested, False), (True, suggested, True)]
    assert bb[1] == figures["launch"]["warm"]["figures"]
    optimizer = bb[1]["optimizer"]
    assert optimizer["ms"] > 0 and optimizer["xla_bytes_accessed"] > optimizer["parameter_bytes"]
    for f in bb + [e["figures"] for e in figures["bg_lg"]]:
        _check_step(f)
    assert [f["grad_accum_steps"] for f in (e["figures"] for e in figures["bg_lg"])] == [2]


def test_decoding_rows_give_captions_per_second(report):
    figures = report[1]
    methods = {row["method"]: row for row in figures["decoding"]["rows"]}
    assert set(methods) == {"greedy (cache)", "beam 4 (cache)"}
    for row in methods.values():
        assert math.isclose(row["captions_per_s"], row["batch"] / row["run_s"])


def test_attention_rows_time_xla_without_cudnn_here(report):
    figures = report[1]
    rows = figures["attention"]["rows"]
    assert len(rows) == 4
    for row in rows:
        assert row["xla_ms"] > 0
        assert row["cudnn_ms"] is None and row["cudnn_error"].startswith("not available")


def test_a_devices_trace_of_the_warm_launch_makes_the_kernels_row():
    compile_figures = {"lower_s": 1.0, "compile_s": 2.0, "cache_hit": True}
    figures = {"launch_s": 9.0, "compile_init": compile_figures, "compile_step": compile_figures,
               "step_s": 0.129, "kernels": {
                   "busy_ms": 127.8, "parts_ms": {"forward": 17.1, "matmul": 76.8},
                   "longest": [("nvjet_sm90_tst_128x160", 8.7), ("cudnn_sdpa_bprop", 5.5)]}}
    table = accelerator_report.table({"launch": {"warm": {
        "setting": "configs/bb.py", "figures": figures, "error": None}}})
    assert table.splitlines()[-1] == (
        "| kernels | 3 traced steps of the warm launch, ms a step | busy 127.8 of 129.0: matmul "
        "76.8, forward 17.1; longest nvjet_sm90_tst_128x160 8.70; cudnn_sdpa_bprop 5.50 |")
