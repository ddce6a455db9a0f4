"""The XM3600 evaluator (type `xm3600_cider`): CIDEr-D on XM3600's human references.

Fields: `data_dir` (captions.jsonl + images/) and the common ones (evaluators/__init__.py).
Metrics `eval/cider_d/<lang>` and `eval/cider_d/avg`; its report is the paper's Table 8.
"""

from evaluation.evaluators import caption_evaluator


class Xm3600Cider(caption_evaluator.CaptionEvaluator):
    metric_prefix = "eval/cider_d/"
    outputs_name = ""
    title = "CIDEr-D on XM3600"
    paper_column = "xm3600"
