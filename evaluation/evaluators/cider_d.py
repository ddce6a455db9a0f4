"""CIDEr-D scoring of decoded captions, shared by the XM3600 and COCO-dev evaluators."""

from evaluation import cider
from evaluation.evaluators import caption_evaluator


class CiderDEvaluator(caption_evaluator.CaptionEvaluator):
    """A CaptionEvaluator whose metric is CIDEr-D against the set's references.

    Each language's references are prepared once (on one thread per core);
    a call then scores new captions only.
    """
    metric = "cider-d"

    def make_scorers(self, langs):
        def prepare(lang):
            scorer = cider.CiderScorer(self.data.references[lang], lang)

            def score(captions):
                result = scorer.score(captions)
                return result.corpus, result.per_image
            return score

        return cider.map_languages(prepare, langs)
