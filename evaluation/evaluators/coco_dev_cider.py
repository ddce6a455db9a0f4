"""The COCO-dev evaluator (type `coco_dev_cider`): CIDEr-D on COCO-35L's dev split.

The paper's second column (Tables 8-11): Karpathy val images with their machine-translated
references, in the 35 training languages. Fields: `manual_dir` (the COCO-35L release folder)
and the common ones (evaluators/__init__.py). Metrics `eval/coco_dev/cider_d/<lang>` and
`.../avg`; files `predictions_coco_dev_<lang>.jsonl`, `per_image_coco_dev.jsonl`,
`scores_coco_dev.json` and `table_coco_dev.md`, and the COCO-dev column of XM3600's report.
"""

from data import eval_sets, languages
from data.releases import coco35l as coco35l_release
from evaluation.evaluators import caption_evaluator


class CocoDevCider(caption_evaluator.CaptionEvaluator):
    metric_prefix = "eval/coco_dev/cider_d/"
    outputs_name = "coco_dev"
    title = "CIDEr-D on COCO-dev"
    all_langs = tuple(languages.TRAIN_35L_LANGS)
    paper_column = "coco_dev"

    @classmethod
    def data_langs(cls, eval_config):
        examples, _ = coco35l_release.read_split(eval_config.manual_dir, "dev", cls.all_langs,
                                                 check_images=False)
        return tuple(lang for lang in cls.all_langs if examples[lang])

    def load(self, eval_config, setup, langs):
        return eval_sets.load_coco_dev(eval_config.manual_dir, langs, setup.vocab,
                                       **setup.caption_set_args(eval_config))
