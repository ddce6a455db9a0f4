"""The XM3600 evaluator (type `xm3600_cider`): CIDEr-D on the human references of XM3600.

Config fields (`config.evals.<name>`): `data_dir` (captions.jsonl +
images/), `langs`, `every`, `batch_size`, `max_decode_len`, `max_images`
(None: all 3600), optional `decode` / `beam_size` / `alpha`. Metrics:
`eval/cider_d/<lang>` and `eval/cider_d/avg` (the names every run so far has
logged). Its files in a results folder: `predictions_<lang>.jsonl`,
`per_image.jsonl` and the Table 8 report (scores.json, scores.csv, table.md,
bars.png; evaluation/report.py), with the COCO-dev column when the
checkpoint was also evaluated on COCO-dev.
"""

from data import languages
from evaluation import report as report_lib
from evaluation.evaluators import cider_d, coco_dev_cider, common


class Xm3600Cider(cider_d.CiderDEvaluator):
    """Decodes the XM3600 images in each language and scores them with CIDEr-D.

    Args:
        name: the key in `config.evals`.
        eval_config: its ConfigDict (see the module docstring).
        setup: an `evaluation.evaluators.common.Setup`.
        langs: languages instead of `eval_config.langs`.
        decoding: a `Decoding` instead of the config's.
    """
    metric_prefix = "eval/cider_d/"
    outputs_name = ""  # The results folder's own files: predictions_<lang>.jsonl, scores.json.
    title = "CIDEr-D on XM3600"
    all_langs = tuple(languages.XM3600_LANGS)

    def __init__(self, name, eval_config, setup, *, langs=None, decoding=None):
        langs = self.config_langs(name, eval_config.langs if langs is None else langs)
        caption_set = common.load_xm3600_set(eval_config, setup, langs)
        super().__init__(name, eval_config, caption_set, setup, decoding)

    def report(self, out_dir, results, checkpoint):
        """Table 8 next to the paper's baselines (report.write_report), with the COCO-dev
        column from the checkpoint's COCO-dev metrics when it has them."""
        scores = {lang: r.corpus for lang, r in results.items()}
        coco_dev = coco_dev_cider.CocoDevCider.scores_in(checkpoint.metrics)
        extra = self.report_fields(scores, checkpoint)
        if coco_dev:
            extra["coco_dev_avg_35"] = report_lib.averages(coco_dev)["avg_35"]
        return report_lib.write_report(
            out_dir, scores, self.num_images, coco_dev_scores=coco_dev or None,
            name=checkpoint.name, step=checkpoint.step, config=checkpoint.config_name,
            extra=extra)
