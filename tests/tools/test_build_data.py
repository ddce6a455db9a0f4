"""`python -m tools.build_data` (tools/build_data.py) as a user runs it."""

from tests import tiny
from tests.data.build import release_files


def test_a_corrupt_image_met_by_a_worker_process_is_one_error_line_with_status_2(tmp_path):
    manual = release_files.coco35l(tmp_path / "manual", images=(5, 6, 7),
                                   splits=("train", "train", "val"))
    broken = manual / "train2014" / "COCO_train2014_000000000006.jpg"
    broken.write_bytes(broken.read_bytes()[:40])
    process = tiny.run("-m", "tools.build_data", "coco35l", "--manual_dir", manual, "--data_dir",
                       tmp_path / "built", "--langs", "en", "--workers", "2")
    assert process.code == 2, process.text
    assert "Traceback" not in process.text
    errors = [line for line in process.text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "corrupt image" in errors[0] \
        and "COCO_train2014_000000000006.jpg" in errors[0], process.text
