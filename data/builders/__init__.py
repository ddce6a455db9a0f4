"""Builders of XM3600 (a TFDS builder), COCO-35L and CC3M-35L (data/builders/corpus.py).

data/build.py builds them from the command line. Nothing is imported here, so
that the build's worker processes load only what they use (no TFDS).
"""
