"""Tests of benchmarks/train_step.py: bad input (one error line, status 2), the profile's
summary of where the device's time went."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from benchmarks import train_step

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# One subprocess per case (each imports the trainer: seconds): a bad flag, a bad config
# value whose message comes from model/captioner.py (tested there in full), and a
# misspelled config field (train.py's flag parser).
@pytest.mark.parametrize("args, message", [
    (["--steps", "0"], "error: --steps=0 must be at least 1"),
    (["--config.model.t5.variant=mt5-huge"], "error: config.model.t5: unknown T5 variant "
                                              "'mt5-huge'"),
    (["--config.batch_sise=2"], "error: --config.batch_sise=2: the config has no field"),
])
def test_bad_input_exits_2_with_one_error_line(args, message):
    result = subprocess.run(
        [sys.executable, "benchmarks/train_step.py", "--config", "configs/demo.py", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1].startswith(message)


# A step's optimized HLO as XLA prints it: each kernel's instruction names its JAX op.
HLO = """ENTRY %main.9 (p: f32[8]) -> f32[8] {
  %gemm_fusion_dot.3 = bf16[8,8]{1,0} fusion(%p), metadata={op_name="jit(f)/jvp(M)/dot_general"}
  %loop_multiply_fusion.2 = bf16[8]{0} fusion(%p), metadata={op_name="jit(f)/jvp(M)/mlp/mul"}
  %input_reduce_fusion.7 = f32[8]{0} fusion(%p), metadata={op_name="jit(f)/transpose(jvp(M))/sum"}
  %loop_sqrt_fusion = f32[8]{0} fusion(%p), kind=kLoop, metadata={op_name="jit(f)/sqrt"}
  ROOT %copy.1 = f32[8]{0} copy(%p), metadata={scheduling_name="copy.1"}
}
"""


def _perfetto_trace(folder, kernels, device="/device:GPU:0"):
    """jax.profiler's Perfetto file: a host process and `device` (None: none, as a CPU's) with
    one stream running `kernels`, complete events of (name, microseconds)."""
    events = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
              {"ph": "X", "pid": 1, "tid": 5, "ts": 0.0, "dur": 9000.0,
               "name": "PjitFunction(train_step)"}]
    pid = 7 if device else 1
    if device:
        events += [{"ph": "M", "pid": 7, "name": "process_name", "args": {"name": device}},
                   {"ph": "M", "pid": 7, "tid": 3, "name": "thread_name",
                    "args": {"name": "Stream #14(Compute)"}}]
    for i, (name, dur_us) in enumerate(kernels):
        events.append({"ph": "X", "pid": pid, "tid": 3, "ts": 10.0 * i, "dur": dur_us,
                       "name": name})
    run = folder / "plugins" / "profile" / "2026_12_04_13_00_00"
    run.mkdir(parents=True)
    with gzip.open(run / "perfetto_trace.json.gz", "wt") as f:
        json.dump({"displayTimeUnit": "ns", "traceEvents": events}, f)


def test_profile_kernels_are_summed_by_part_per_step(tmp_path):
    _perfetto_trace(tmp_path, [
        ("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT", 3000.0),  # cuBLAS
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 1500.0),
        ("gemm_fusion_dot_3", 1500.0), ("loop_multiply_fusion_2", 600.0),
        ("loop_multiply_fusion_2", 600.0), ("input_reduce_fusion_7", 900.0),
        ("loop_sqrt_fusion", 300.0), ("copy_1", 60.0), ("Memset", 30.0)])
    got = train_step.kernel_times(str(tmp_path), HLO, steps=3)
    assert got["parts_ms"] == pytest.approx({"matmul": 2.0, "forward": 0.4, "backward": 0.3,
                                             "other": 0.1, "unattributed": 0.03})
    assert got["busy_ms"] == pytest.approx(2.83)
    assert got["longest"][0] == ("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT", pytest.approx(1.0))


def test_a_trace_without_a_device_has_no_kernel_summary(tmp_path):
    _perfetto_trace(tmp_path, [("loop_multiply_fusion_2", 600.0)], device=None)
    assert train_step.kernel_times(str(tmp_path), HLO, steps=3) is None


def test_a_folder_without_a_perfetto_trace_has_no_kernel_summary(tmp_path):
    assert train_step.kernel_times(str(tmp_path), HLO, steps=3) is None
