"""CC3M-35L built from miniature release files: img2dataset tars or files, missing images."""

import bz2
import logging
import shutil

import pytest

from data import build
from data.build import builder, layout
from tests.data.build import release_files


def _build(manual, data_dir, **kwargs):
    return build.build("cc3m35l", manual_dir=str(manual), data_dir=str(data_dir),
                       **{"config": "core", "workers": 0, **kwargs})


class _Recorded(builder.Progress):
    made = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.made.append(self)


class _Messages(logging.Handler):
    """The warnings logged while it is attached, as text."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.text = ""

    def emit(self, record):
        self.text += record.getMessage() + "\n"


@pytest.fixture(scope="module", params=[True, False], ids=["shards", "files"])
def cc3m_build(request, tmp_path_factory):
    """(build folder, counts, its progress line, the warnings logged) of the release files, as
    img2dataset tars or files, one image missing."""
    root = tmp_path_factory.mktemp("cc3m_build")
    manual = release_files.cc3m35l(root / "manual", shards=request.param)
    messages = _Messages()
    logging.getLogger().addHandler(messages)
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(builder, "Progress", _Recorded)
            monkeypatch.setattr(_Recorded, "made", [])
            counts = _build(manual, root / "built")
            (progress,) = _Recorded.made
    finally:
        logging.getLogger().removeHandler(messages)
    return root / "built", counts, progress, messages.text


def test_the_image_progress_ends_at_100_percent(cc3m_build):
    _, _, progress, _ = cc3m_build
    # The images' share counts the input files' bytes (a tar's headers, .txt and .json too),
    # as its total does: it ends at 100%.
    assert progress.image_total > 0 and progress.image_done == progress.image_total
    assert "images 100% (6, " in progress.line()


def test_the_build_counts_images_once_captions_per_language(cc3m_build):
    _, counts, _, _ = cc3m_build
    assert counts == {"images/train": 4, "images/dev": 2,
                      **{f"captions/{s}_{l}": 4 if s == "train" else 2
                         for s in ("train", "dev") for l in ("en", "es", "hi", "zh")}}


def test_captions_are_stored_per_language(cc3m_build):
    built_dir, _, _, _ = cc3m_build
    built = layout.Built(str(built_dir), "cc3m35l")
    assert built.captions("train", "hi").read(range(4)) == [
        (i, key, (f"hi picture {key}",)) for i, key in enumerate((0, 1, 2, 4))]
    assert [built.captions("dev", "en")[1]] == [(1, 1, ("picture 1",))]


def test_the_stored_images_are_the_releases_in_key_order(cc3m_build):
    built_dir, _, _, _ = cc3m_build
    built = layout.Built(str(built_dir), "cc3m35l")
    assert [key for key, _ in [built.images("train")[i] for i in (3, 0)]] == [4, 0]
    assert [built.images("train")[3]][0][1] == release_files.jpeg(40)


def test_captions_of_a_missing_image_are_left_out_with_a_warning(cc3m_build):
    _, _, _, warnings = cc3m_build
    assert "captioned images without a stored image" in warnings
    assert "'train_hi': 1" in warnings


def test_english_is_the_first_source_caption_of_each_record(tmp_path):
    manual = release_files.cc3m35l(tmp_path / "manual", shards=False)
    with bz2.open(manual / "cc3m_mt_dev.jsonl.bz2", "wt", encoding="utf-8") as f:
        f.write('{"rec_num": 1, "trg_lang": "es", "caption_tokenized": "first", '
                '"translation_tokenized": "primero"}\n'
                '{"image_id": "1", "trg_lang": "zh", "caption_tokenized": "second", '
                '"translation_tokenized": "第二"}\n'
                '{"image_id": "0", "trg_lang": "hi", "caption_tokenized": "zero", '
                '"translation_tokenized": "शून्य"}\n')
    _build(manual, tmp_path / "built", langs=["en", "es", "zh"], config=None)
    built = layout.Built(str(tmp_path / "built"), "cc3m35l")
    assert built.captions("dev", "en").read([0, 1]) == [(0, 0, ("zero",)), (1, 1, ("first",))]
    assert [built.captions("dev", "zh")[0]] == [(1, 1, ("第二",))]


def test_a_line_missing_a_field_is_named_by_file_line(tmp_path):
    manual = release_files.cc3m35l(tmp_path / "manual", shards=False)
    with bz2.open(manual / "cc3m_mt_dev.jsonl.bz2", "wt", encoding="utf-8") as f:
        f.write('{"image_id": "0", "trg_lang": "es"}\n')
    with pytest.raises(ValueError, match=r"cc3m_mt_dev.jsonl.bz2:1: expected an object"):
        _build(manual, tmp_path / "built")


def test_a_malformed_record_key_is_named_by_file_line(tmp_path):
    manual = release_files.cc3m35l(tmp_path / "manual", shards=False)
    with bz2.open(manual / "cc3m_mt_dev.jsonl.bz2", "wt", encoding="utf-8") as f:
        f.write('{"image_id": "x7", "trg_lang": "es", "caption_tokenized": "a", '
                '"translation_tokenized": "b"}\n')
    with pytest.raises(ValueError, match=r"cc3m_mt_dev.jsonl.bz2:1: needs an integer record key "
                                         r"in one of image_id, rec_num, got 'x7'"):
        _build(manual, tmp_path / "built")


def test_missing_or_empty_image_folders_say_where_they_go(tmp_path):
    manual = release_files.cc3m35l(tmp_path / "manual", shards=False)
    shutil.rmtree(manual / "dev")
    with pytest.raises(FileNotFoundError, match=r"missing CC3M dev images: expected the folder"):
        _build(manual, tmp_path / "built")
    (manual / "dev").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no CC3M dev images under .*dev: expected "
                                                r"img2dataset shards"):
        _build(manual, tmp_path / "built")


def test_a_broken_tar_shard_is_named(tmp_path):
    manual = release_files.cc3m35l(tmp_path / "manual", shards=True)
    (manual / "train" / "00001.tar").write_bytes(b"not a tar file at all" * 40)
    with pytest.raises(ValueError, match=r"00001.tar: not a readable tar shard"):
        _build(manual, tmp_path / "built")
