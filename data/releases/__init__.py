"""The release files as their authors publish them: read this first, one module per release.

`xm3600.py` (Crossmodal-3600: captions.jsonl and its images), `coco35l.py` (COCO-35L: the
Karpathy split, the COCO 2014 JPEGs and the translation files) and `cc3m35l.py` (CC3M-35L:
the translation files and the user's img2dataset shards) read and check them, naming the file
and line of anything malformed. The build (data/build/) and the evaluation sets
(data/eval_sets.py) read the releases through these modules.
"""
