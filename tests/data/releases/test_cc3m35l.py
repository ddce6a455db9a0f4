"""Tests of the CC3M-35L release reader (data/releases/cc3m35l.py)."""

import re

import pytest

from data.releases import cc3m35l
from tests import test_structure


@pytest.mark.parametrize("split", cc3m35l.SPLITS)
def test_a_missing_translation_file_names_the_url_docs_files_md_gives(tmp_path, split):
    with pytest.raises(FileNotFoundError) as info:
        cc3m35l.translations_path(str(tmp_path), split)
    url = re.search(r"get it from (\S+)", str(info.value)).group(1)
    assert url == f"https://storage.googleapis.com/crossmodal-3600/cc3m_mt_{split}.jsonl.gz"
    assert url in (test_structure.ROOT / "docs" / "files.md").read_text(encoding="utf-8")
