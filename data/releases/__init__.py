"""The release files as their authors publish them: read this first, one module per release.

`xm3600.py`, `coco35l.py` and `cc3m35l.py` read and check them, naming the file and line of
anything malformed; the build and the evaluation sets read the releases through them.
"""
