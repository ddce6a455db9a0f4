"""Learning-rate schedules and the one helper that turns durations into steps.

The paper (Sec. 3.2) keeps the learning rate constant for `cp` steps, then
decays it as the reverse square root of the step: lr = base * sqrt(cp / step).
"""

import jax.numpy as jnp


def rsqrt_after_constant(base, constant_steps):
    """Returns step -> learning rate: `base` up to `constant_steps`, then base*sqrt(cp/step).

    Args:
        base: the constant learning rate.
        constant_steps: `cp`, the number of steps at the constant rate (>= 1).
    """
    if base <= 0:
        raise ValueError(f"learning rate must be positive, got {base}")
    if constant_steps < 1:
        raise ValueError(f"lr.constant_steps must be >= 1, got {constant_steps}")
    cp = float(constant_steps)

    def schedule(step):
        step = jnp.asarray(step, jnp.float32)
        return base * jnp.sqrt(cp / jnp.maximum(step, cp))

    return schedule


def constant(base):
    """A constant learning rate (finetuning, e.g. BB+CC's second stage)."""
    return lambda step: jnp.full((), base, jnp.float32)


def steps(name, config, *, examples_per_epoch=None, batch_size=None):
    """Reads a duration given in steps, epochs or examples as a number of steps.

    The config holds at most one of `<name>_steps`, `<name>_epochs`,
    `<name>_examples`; epochs and examples need the dataset size and batch.

    Args:
        name: the duration's name, e.g. "total".
        config: a ConfigDict.
        examples_per_epoch: number of training examples (for epochs).
        batch_size: the global batch size (for epochs and examples).

    Returns:
        An int, or None when none of the fields is set.
    """
    given = {unit: config.get(f"{name}_{unit}") for unit in ("steps", "epochs", "examples")}
    given = {unit: v for unit, v in given.items() if v is not None}
    if len(given) > 1:
        raise ValueError(f"config sets more than one of {', '.join(f'{name}_{u}' for u in given)}")
    if not given:
        return None
    (unit, value), = given.items()
    if unit == "steps":
        return int(value)
    if batch_size is None or (unit == "epochs" and examples_per_epoch is None):
        raise ValueError(f"config.{name}_{unit} needs the dataset size and batch size")
    examples = value * examples_per_epoch if unit == "epochs" else value
    return max(1, round(examples / batch_size))


def itstime(step, every, total_steps, *, first=False, last=True):
    """Whether a periodic action (log, checkpoint, eval) happens at `step`.

    Args:
        step: the number of training steps done so far.
        every: the period in steps; 0 or None disables periodic actions.
        total_steps: the run's length.
        first: also at step 0 (before training).
        last: also at the final step.
    """
    if first and step == 0:
        return True
    if last and step == total_steps:
        return True
    return bool(every) and step > 0 and step % every == 0
