"""The demo config's first 100 steps: which (language, image, reference) each example is, pinned
(the order is a pure function of seed, step and process; pinned scores and resumes rely on it)."""

import hashlib

import numpy as np
import pytest

from configs import demo as demo_config
from data.pipeline import sampling

STEPS = 100
IMAGES = 2000  # Per language in the demo's training split (Karpathy train + restval).
# sha256 of the int64 rows (language, image, reference of 2, reference of 5), steps 0-99.
PINNED = {
    (0, 1): "b34e8e22883939eb2a29936f7815b3c31dbd6b30055aa10d0c4cc2d19167ee73",
    (1, 2): "2a20d8eb6c58500952fb18c5c830ce592afda8739c23276e3333550fb91e0eac",
}
# The first examples of step 0 of process 0 of 1, for a reader of a failure.
FIRST = [[2, 713, 0, 2], [0, 1925, 1, 4], [1, 811, 0, 0], [3, 843, 0, 0],
         [3, 695, 1, 4], [1, 1341, 0, 1], [2, 1285, 0, 0], [0, 1622, 1, 2]]


def _rows(process_index, process_count):
    """(language, image, reference among 2, reference among 5) of every example, in order."""
    config = demo_config.get_config()
    num_langs = len(config.data.langs)
    sampler = sampling.Sampler([IMAGES] * num_langs, config.seed)
    local = sampling.local_batch_size(config.batch_size, process_index, process_count)
    rows = []
    for step in range(STEPS):  # This process's positions of each step (data/pipeline/).
        for position in range(step * config.batch_size + process_index * local,
                              step * config.batch_size + (process_index + 1) * local):
            lang, image, draw = sampler.example(position)
            rows.append((lang, image, sampling.reference_index(draw, 2),
                         sampling.reference_index(draw, 5)))
    return np.asarray(rows, np.int64)


@pytest.mark.parametrize("process_index,process_count", sorted(PINNED))
def test_the_demo_steps_take_the_pinned_examples(process_index, process_count):
    rows = _rows(process_index, process_count)
    local = demo_config.get_config().batch_size // process_count
    assert rows.shape == (STEPS * local, 4)
    digest = hashlib.sha256(rows.tobytes()).hexdigest()
    assert digest == PINNED[process_index, process_count]
    if (process_index, process_count) == (0, 1):
        assert rows[:len(FIRST)].tolist() == FIRST
