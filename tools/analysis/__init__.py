"""Analysis tools over results folders and human judgements: reports, comparisons, correlations.

They read what the evaluators and the checkpoint tool write (and human-judgement files) and
import the metric engines, never the trainer.
"""
