"""The COCO-dev evaluator (type `coco_dev_cider`): CIDEr-D on COCO-35L's dev split (Karpathy
val, machine-translated references), the paper's second column. Fields: `manual_dir` (the
COCO-35L release folder) and the common ones. Metrics `eval/coco_dev/cider_d/<lang>`.
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
