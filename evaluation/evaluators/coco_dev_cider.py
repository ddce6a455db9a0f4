"""The COCO-dev evaluator (type `coco_dev_cider`): CIDEr-D on COCO-35L's dev split.

The paper's second column (Tables 8-11): Karpathy val images with their
machine-translated references. Config fields (`config.evals.<name>`):
`manual_dir` (the COCO-35L release folder), `langs` (of the 35 training
languages), `every`, `batch_size`, `max_decode_len`, `max_images` (None: all
5000), optional `decode` / `beam_size` / `alpha`. Metrics:
`eval/coco_dev/cider_d/<lang>` and `eval/coco_dev/cider_d/avg`. Its files
in the checkpoint tool's results folder: `predictions_coco_dev_<lang>.jsonl`,
`per_image_coco_dev.jsonl`, `scores_coco_dev.json` and `table_coco_dev.md`
(and its scores are the COCO-dev column of XM3600's Table 8 report).
"""

from data import eval_sets, languages
from data.releases import coco35l as coco35l_release
from evaluation.evaluators import cider_d


class CocoDevCider(cider_d.CiderDEvaluator):
    """Decodes COCO-35L dev images in each language and scores them with CIDEr-D.

    Args:
        name, eval_config, setup, langs, decoding: as `Xm3600Cider`; languages
            outside the 35 training languages are an error.
    """
    metric_prefix = "eval/coco_dev/cider_d/"
    outputs_name = "coco_dev"
    title = "CIDEr-D on COCO-dev"
    all_langs = tuple(languages.TRAIN_35L_LANGS)
    paper_column = "coco_dev"

    @classmethod
    def data_langs(cls, eval_config):
        """The training languages that COCO-35L's dev split in `manual_dir` has."""
        examples, _ = coco35l_release.read_split(eval_config.manual_dir, "dev", cls.all_langs,
                                                 check_images=False)
        return tuple(lang for lang in cls.all_langs if examples[lang])

    def __init__(self, name, eval_config, setup, *, langs=None, decoding=None):
        langs = self.config_langs(name, eval_config.langs if langs is None else langs)
        caption_set = eval_sets.load_coco_dev(
            eval_config.manual_dir, langs, setup.vocab, image_size=setup.image_size,
            prompt_template=setup.prompt_template,
            max_prompt_len=setup.data_config.max_prompt_len,
            max_images=eval_config.get("max_images", None))
        super().__init__(name, eval_config, caption_set, setup, decoding)
