"""Tests of training/schedules.py: the paper's learning rate and the step helpers."""

import numpy as np

from training import schedules


def test_rsqrt_after_constant_follows_the_paper():
    lr = schedules.rsqrt_after_constant(1e-3, constant_steps=100)
    for step in (0, 1, 50, 100):
        np.testing.assert_allclose(lr(step), 1e-3, rtol=1e-7)
    for step in (101, 400, 10_000):
        np.testing.assert_allclose(lr(step), 1e-3 * np.sqrt(100 / step), rtol=1e-6)


def test_itstime_every_n_steps_the_first_the_last():
    assert schedules.itstime(0, 10, 100, first=True)
    assert not schedules.itstime(0, 10, 100)
    assert schedules.itstime(20, 10, 100) and not schedules.itstime(25, 10, 100)
    assert schedules.itstime(95, 10, 95)          # The last step always.
    assert not schedules.itstime(5, 0, 100)       # Disabled.
