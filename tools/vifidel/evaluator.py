"""The VIFIDEL evaluator: visual fidelity of XM3600 captions to object labels.

A config names it by its module path, `type="tools.vifidel.evaluator:Xm3600Vifidel"` (the
evaluator contract: evaluation/evaluators/__init__.py). It decodes the XM3600 images in each
language (as `xm3600_cider` does) and scores the captions with VIFIDEL (tools/vifidel/):
exp(-WMD) between each image's object labels (Open Images labels, XM3600's images being Open
Images images) and the caption's content words, in one aligned word-vector space, with the
references' importance penalty unless `use_references` is False. The settings are those of
`python -m tools.vifidel`, each default the paper's.

Config fields (`config.evals.<name>`): `data_dir` (captions.jsonl + images/), `langs`, `every`,
`batch_size`, `max_decode_len`, `max_images`, `labels` (label files or glob patterns; default
`<data_dir>/*-annotations-human-imagelabels*.csv`), `class_descriptions` (default
`<data_dir>/oidv7-class-descriptions.csv`), `vectors` (a pattern with {lang}, or a tuple of
patterns and LANG=PATH entries), and optionally `label_lang` ("en"), `use_references` (True),
`penalty` ("halved": Eq. 4; or "clipped"), `cost_power` (2: Eq. 1; or 1: the authors' script),
`stopwords` ("function": function words from Universal Dependencies; "iso": the stopwordsiso
lists; "none"; or a folder of <lang>.txt), `label_weights`
("instances" or "binary"), `multiword` ("mean"), `min_confidence` (1.0),
`allow_missing_labels` (False), `decode` / `beam_size` / `alpha`. Metrics: `eval/vifidel/<lang>`
and `eval/vifidel/avg`. Its files in a results folder: `predictions_vifidel_<lang>.jsonl`,
`per_image_vifidel.jsonl` (no line for an image without a known label), `scores_vifidel.json`
and `table_vifidel.md`.
"""

import os

import errors
from evaluation import cider
from evaluation.evaluators import caption_evaluator
from tools import vifidel as vifidel_lib
from tools.vifidel import stopwords as stop_lists

DEFAULT_LABELS = "*-annotations-human-imagelabels*.csv"
DEFAULT_CLASS_DESCRIPTIONS = "oidv7-class-descriptions.csv"


def settings_from_config(name, eval_config):
    """The `tools.vifidel.Settings` of `config.evals.<name>`.

    Raises:
        ValueError: `vectors` is missing or a setting is outside its choices (the field is
            named).
    """
    data_dir = eval_config.data_dir
    vectors = eval_config.get("vectors", None)
    if not vectors:
        raise ValueError(f"config.evals.{name}.vectors is required: a path pattern with "
                         f"{{lang}} (e.g. vectors/wiki.{{lang}}.align.vec) or LANG=PATH entries")
    labels = eval_config.get("labels", None) or os.path.join(data_dir, DEFAULT_LABELS)
    settings = vifidel_lib.Settings(
        vectors=(vectors,) if isinstance(vectors, str) else tuple(vectors),
        labels=(labels,) if isinstance(labels, str) else tuple(labels),
        class_descriptions=eval_config.get("class_descriptions", None) or os.path.join(
            data_dir, DEFAULT_CLASS_DESCRIPTIONS),
        label_lang=eval_config.get("label_lang", "en"),
        use_references=eval_config.get("use_references", True),
        penalty=eval_config.get("penalty", "halved"),
        cost_power=eval_config.get("cost_power", 2),
        stopwords=eval_config.get("stopwords", stop_lists.DEFAULT) or "none",
        label_weights=eval_config.get("label_weights", "instances"),
        multiword=eval_config.get("multiword", "mean"),
        min_confidence=eval_config.get("min_confidence", 1.0),
        allow_missing_labels=eval_config.get("allow_missing_labels", False))
    try:
        settings.check()
    except errors.InputError as e:
        raise ValueError(f"config.evals.{name}: {e}") from None
    return settings


class Xm3600Vifidel(caption_evaluator.CaptionEvaluator):
    """Decodes the XM3600 images in each language and scores them with VIFIDEL.

    Raises:
        ValueError: a bad field, or bad label / vector files (the message names the field,
            file, line or value).
    """
    metric_prefix = "eval/vifidel/"
    outputs_name = "vifidel"
    metric = "vifidel"
    title = "VIFIDEL on XM3600"

    @classmethod
    def check_config(cls, name, eval_config):
        settings_from_config(name, eval_config)

    def __init__(self, name, eval_config, setup, *, langs=None, decoding=None):
        self.settings = settings_from_config(name, eval_config)
        try:
            super().__init__(name, eval_config, setup, langs=langs, decoding=decoding)
        except errors.InputError as e:
            raise ValueError(f"config.evals.{name}: {e}") from None

    def make_scorers(self, langs):
        scorers = vifidel_lib.build_scorers({lang: self.data.keys[lang] for lang in langs},
                                            {lang: self.data.references[lang] for lang in langs},
                                            self.settings, map_fn=cider.map_languages)
        return [caption_evaluator.corpus_and_per_image(scorers[lang].score) for lang in langs]
