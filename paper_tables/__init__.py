"""The XM3600 paper's tables (README.md beside this file says which table each file holds)."""

import pathlib

FOLDER = pathlib.Path(__file__).resolve().parent
CAPTION_STATS = "caption_stats.csv"  # Table 1.
CIDER_PER_LANGUAGE = "cider_per_language.csv"  # Tables 8-11.
