"""Reads a run's metrics.jsonl back, as the tests check it."""

from training import metrics


def read_metrics(workdir):
    """The records of `workdir/metrics.jsonl`; one cut short at the end is left out."""
    path = metrics.metrics_path(workdir)
    return [record for _, record in metrics._scan(path, metrics._read(path))[0]]
