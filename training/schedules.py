"""Learning-rate schedules, and when periodic actions happen.

The paper (Sec. 3.2) keeps the learning rate constant for `cp` steps, then decays it as
lr = base * sqrt(cp / step).
"""

import jax.numpy as jnp


def rsqrt_after_constant(base, constant_steps):
    """step -> learning rate: `base` up to `constant_steps` (cp >= 1), then base*sqrt(cp/step).
    run_config.FIELDS checks lr.base > 0 and lr.constant_steps >= 1."""
    cp = float(constant_steps)
    return lambda step: base * jnp.sqrt(cp / jnp.maximum(jnp.asarray(step, jnp.float32), cp))


def constant(base):
    """A constant learning rate (finetuning, e.g. BB+CC's second stage)."""
    return lambda step: jnp.full((), base, jnp.float32)


def itstime(step, every, total_steps, *, first=False):
    """Whether a periodic action happens at `step`: every `every` steps, the last, and the first
    if asked."""
    return ((first and step == 0) or step == total_steps
            or (bool(every) and step > 0 and step % every == 0))
