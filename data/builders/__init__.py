"""TFDS builders of XM3600, COCO-35L and CC3M-35L from manually downloaded files.

Importing this package registers the builders `xm3600`, `coco35l` and
`cc3m35l` with TFDS; data/build.py builds them from the command line.
"""

from data.builders import cc3m35l, coco35l, xm3600  # noqa: F401  (registration)
