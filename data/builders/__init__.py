"""TFDS builders of XM3600, COCO-35L and CC3M-35L from manually downloaded files.

Importing this package registers the builders `xm3600`, `coco35l` and
`cc3m35l` with TFDS; data/build.py builds them from the command line.
"""

from data.builders import cc3m35l_tfds, coco35l_tfds, xm3600_tfds  # noqa: F401  (registration)
