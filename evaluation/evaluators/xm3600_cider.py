"""The XM3600 evaluator (type `xm3600_cider`): CIDEr-D on the human references of XM3600.

Config fields (`config.evals.<name>`): `data_dir` (captions.jsonl +
images/), `langs`, `every`, `batch_size`, `max_decode_len`, `max_images`
(None: all 3600), optional `decode` / `beam_size` / `alpha`. Metrics:
`eval/cider_d/<lang>` and `eval/cider_d/avg` (the names every run so far has
logged). Its scores are the XM3600 column of the paper's Table 8: the checkpoint
tool's results folder holds its predictions (`predictions_<lang>.jsonl`),
`per_image.jsonl` and the Table 8 report (scores.json, scores.csv, table.md,
bars.png; evaluation/report.py), with the COCO-dev column when the checkpoint
was also evaluated on COCO-dev.
"""

from data import languages
from evaluation.evaluators import caption_evaluator, cider_d


class Xm3600Cider(cider_d.CiderDEvaluator):
    """Decodes the XM3600 images in each language and scores them with CIDEr-D.

    Args:
        name: the key in `config.evals`.
        eval_config: its ConfigDict (see the module docstring).
        setup: an `evaluation.evaluators.caption_evaluator.Setup`.
        langs: languages instead of `eval_config.langs`.
        decoding: a `Decoding` instead of the config's.
    """
    metric_prefix = "eval/cider_d/"
    outputs_name = ""  # The results folder's own files: predictions_<lang>.jsonl, scores.json.
    title = "CIDEr-D on XM3600"
    all_langs = tuple(languages.XM3600_LANGS)
    paper_column = "xm3600"

    def __init__(self, name, eval_config, setup, *, langs=None, decoding=None):
        langs = self.config_langs(name, eval_config.langs if langs is None else langs)
        caption_set = caption_evaluator.load_xm3600_set(eval_config, setup, langs)
        super().__init__(name, eval_config, caption_set, setup, decoding)
