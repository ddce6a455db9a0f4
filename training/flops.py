"""Model FLOPs utilization: the compiled step's FLOPs against the devices' peak.

FLOPs come from XLA's cost analysis of the compiled train step (what the
hardware is asked to do, rematerialization included, so this is closer to
"hardware FLOPs utilization" when remat is on). Peak numbers are dense bf16
matrix-unit figures from the vendors' data sheets.
"""

import jax

# device_kind (as jax reports it, lowercased prefix) -> peak dense bf16 FLOP/s per device.
PEAK_BF16_FLOPS = {
    "tpu v4": 275e12,
    "tpu v5 lite": 197e12,
    "tpu v5e": 197e12,
    "tpu v5p": 459e12,
    "tpu v6 lite": 918e12,
    "nvidia h100": 989e12,
    "nvidia h200": 989e12,
    "nvidia a100": 312e12,
}


def peak_flops(device=None):
    """Peak bf16 FLOP/s of `device` (default: the first), or None when unknown (e.g. CPU)."""
    kind = (device or jax.devices()[0]).device_kind.lower()
    for prefix, flops in PEAK_BF16_FLOPS.items():
        if kind.startswith(prefix):
            return flops
    return None


def compiled_flops(compiled):
    """Total FLOPs of one call of a compiled jax function (all devices), or None."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, (list, tuple)):  # Older jax: one dict per device program.
        analysis = analysis[0] if analysis else None
    if not analysis or "flops" not in analysis:
        return None
    # The analysis is of the per-device SPMD program; the step runs on every device.
    return float(analysis["flops"]) * jax.device_count()


def mfu(step_flops, step_seconds, num_devices=None):
    """Fraction of the devices' peak that `step_flops` in `step_seconds` reaches, or None."""
    peak = peak_flops()
    if not step_flops or not peak or step_seconds <= 0:
        return None
    return step_flops / step_seconds / (peak * (num_devices or jax.device_count()))
