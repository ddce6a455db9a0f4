"""Tests of formats/eval_metrics.py: a checkpoint's metrics.json."""

import numpy as np
import pytest

from formats import eval_metrics


def test_written_metrics_read_back(tmp_path):
    path = eval_metrics.write(tmp_path / eval_metrics.FILE_NAME, np.int64(20),
                              {"eval/cider_d/en": np.float32(0.5), "eval/cider_d/avg": 0.5})
    assert path.read_text().startswith('{\n  "step": 20,\n  "eval/cider_d/en": 0.5')
    assert eval_metrics.read(path) == (20, {"eval/cider_d/en": 0.5, "eval/cider_d/avg": 0.5})


def test_write_refuses_bad_metrics_writing_nothing(tmp_path):
    with pytest.raises(eval_metrics.EvalMetricsError, match="'step': expected a name other"):
        eval_metrics.write(tmp_path / "m.json", 1, {"step": 2.0})
    with pytest.raises(eval_metrics.EvalMetricsError, match="'a': expected a finite number"):
        eval_metrics.write(tmp_path / "m.json", 1, {"a": float("inf")})
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("text, message", [
    ('{"eval/x": 1}', "metrics.json: 'step': expected a step >= 0, got None"),
    ('{"step": 2, "eval/x": "1"}', "metrics.json: 'eval/x': expected a finite number"),
    ('{"step": 2, "eval/x": NaN}', "metrics.json: 'eval/x': expected a finite number"),
    ('[1]', "metrics.json: expected a JSON object"),
    ('{"step": 2,\n', "metrics.json:2: not valid JSON"),
])
def test_bad_files_are_named_with_the_key(tmp_path, text, message):
    path = tmp_path / "metrics.json"
    path.write_text(text)
    with pytest.raises(eval_metrics.EvalMetricsError) as info:
        eval_metrics.read(path)
    assert message in str(info.value)
