"""The XM3600 paper's tables (README.md beside this file says which table each file holds)."""

import pathlib

FOLDER = pathlib.Path(__file__).resolve().parent
CAPTION_STATS = "caption_stats.csv"  # Table 1.
CIDER_PER_LANGUAGE = "cider_per_language.csv"  # Tables 8-11.


def path(name, folder=None):
    """The path of one of the files above, in this folder or in `folder` (a copy of it)."""
    return pathlib.Path(folder or FOLDER) / name
