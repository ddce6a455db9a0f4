"""The XM3600 evaluator (type `xm3600_cider`): CIDEr-D on XM3600's human references.

Fields: `data_dir` (captions.jsonl + images/) and the common ones (evaluators/__init__.py).
Metrics `eval/cider_d/<lang>` and `eval/cider_d/avg`; in the checkpoint tool's results folder,
`predictions_<lang>.jsonl`, `per_image.jsonl` and the paper's Table 8 report (scores.json,
scores.csv, table.md, bars.png; evaluation/report.py), with the COCO-dev column when the
checkpoint was also evaluated on COCO-dev.
"""

from evaluation.evaluators import caption_evaluator


class Xm3600Cider(caption_evaluator.CaptionEvaluator):
    metric_prefix = "eval/cider_d/"
    outputs_name = ""
    title = "CIDEr-D on XM3600"
    paper_column = "xm3600"
