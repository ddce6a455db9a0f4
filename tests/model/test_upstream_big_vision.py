"""Tests of model/upstream/big_vision.py on npz files in big_vision's format."""

import shutil
import zipfile

import numpy as np
import pytest

from model.upstream import big_vision
from tests.model import upstream_files as cf

BF16 = cf.BF16


@pytest.fixture(name="vit_params")
def fixture_vit_params():
    return cf.random_tree(cf.tiny_vit_shapes(), seed=0)


@pytest.mark.parametrize("compressed", [False, True])
def test_modern_npz_roundtrip(tmp_path, vit_params, compressed):
    path = cf.write_npz(str(tmp_path / "vit.npz"), vit_params, compressed=compressed)
    cf.assert_trees_bitwise_equal(big_vision.load(path), vit_params)


def test_bfloat16_stored_as_void_is_recovered(tmp_path, vit_params):
    params = {k: v.astype(BF16) for k, v in cf.flatten(vit_params).items()}
    path = cf.write_npz(str(tmp_path / "vit.npz"), cf.unflatten(params))
    with np.load(path) as raw:
        assert raw["pos_embedding"].dtype.kind == "V"  # numpy's view of bfloat16
    cf.assert_trees_bitwise_equal(big_vision.load(path, dtype=None), cf.unflatten(params))
    loaded = big_vision.load(path)
    assert loaded["pos_embedding"].dtype == np.float32
    np.testing.assert_array_equal(loaded["pos_embedding"],
                                  params["pos_embedding"].astype(np.float32))


def _old_vit_release(modern, class_row, cls):
    """The same weights under the names of the original ViT release."""
    renames = {"MultiHeadDotProductAttention_0": "MultiHeadDotProductAttention_1",
               "LayerNorm_1": "LayerNorm_2", "MlpBlock_0": "MlpBlock_3"}
    old = {}
    for path, value in cf.flatten(modern).items():
        if path == "pos_embedding":
            old["Transformer/posembed_input/pos_embedding"] = np.concatenate(
                [class_row, value], axis=1)
            continue
        if path.startswith("Transformer/encoderblock_"):
            parts = path.split("/")
            parts[2] = renames.get(parts[2], parts[2])
            path = "/".join(parts)
        old[path] = value
    old["cls"] = cls
    return cf.unflatten(old)


def test_original_vit_release_names(tmp_path):
    modern = cf.random_tree(cf.tiny_vit_shapes(map_head=False, classifier=5), seed=1)
    rng = np.random.default_rng(1)
    class_row = rng.standard_normal((1, 1, 8)).astype(np.float32)
    cls = rng.standard_normal((1, 1, 8)).astype(np.float32)
    path = cf.write_npz(str(tmp_path / "ViT-B_16.npz"), _old_vit_release(modern, class_row, cls))
    loaded = big_vision.load(path)
    # The class-token row stays in front; merge decides whether to keep it.
    expected = dict(cf.flatten(modern))
    expected["pos_embedding"] = np.concatenate([class_row, modern["pos_embedding"]], axis=1)
    expected["cls"] = cls
    cf.assert_trees_bitwise_equal(loaded, cf.unflatten(expected))


def test_scan_checkpoint_is_unstacked(tmp_path, vit_params):
    flat = cf.flatten(vit_params)
    blocks = sorted({p.split("/")[1] for p in flat if p.startswith("Transformer/encoderblock_")})
    stacked = {}
    for path in [p for p in flat if p.startswith("Transformer/encoderblock_0/")]:
        rest = path.split("/", 2)[2]
        stacked[f"Transformer/encoderblock/{rest}"] = np.stack(
            [flat[f"Transformer/{block}/{rest}"] for block in blocks])
    flat = {p: v for p, v in flat.items() if not p.startswith("Transformer/encoderblock_")}
    path = cf.write_npz(str(tmp_path / "vit.npz"), cf.unflatten({**flat, **stacked}))
    cf.assert_trees_bitwise_equal(big_vision.load(path), vit_params)


# The same weights as other big_vision versions and wrappers name them.
OTHER_LAYOUTS = {
    "pre_2022_posemb": lambda path: ("Transformer/" if path == "pos_embedding" else "") + path,
    "inlined_map_head": lambda path: path.removeprefix("MAPHead_0/"),
    "train_state_params": lambda path: f"params/{path}",
    "train_state_opt_target": lambda path: f"opt/target/{path}",
}


@pytest.mark.parametrize("layout", sorted(OTHER_LAYOUTS))
def test_other_layouts(tmp_path, vit_params, layout):
    tree = cf.unflatten({OTHER_LAYOUTS[layout](k): v for k, v in cf.flatten(vit_params).items()})
    if layout.startswith("train_state"):
        tree["step"] = np.asarray(7)
    path = cf.write_npz(str(tmp_path / "vit.npz"), tree)
    cf.assert_trees_bitwise_equal(big_vision.load(path), vit_params)


def test_subtree_suffix_also_on_a_step_copy(tmp_path, vit_params):
    txt = {"txt": {"embedding": np.ones((3, 2), np.float32)}}
    path = cf.write_npz(str(tmp_path / "siglip.npz"), {"img": vit_params, **txt})
    cf.assert_trees_bitwise_equal(big_vision.load(path + ":img"), vit_params)
    with pytest.raises(ValueError, match="no sub-tree 'image'.*'img', 'txt'"):
        big_vision.load(path + ":image")
    # big_vision's save_checkpoint(step_copy=10) keeps `<file>-000000010` beside the file.
    path = cf.write_npz(str(tmp_path / "checkpoint.npz"), {"params": {"img": vit_params}})
    step_copy = str(tmp_path / "checkpoint.npz-000000010")
    shutil.copy(path, step_copy)
    cf.assert_trees_bitwise_equal(big_vision.load(step_copy + ":img"), vit_params)
    cf.assert_trees_bitwise_equal(big_vision.load(step_copy)["img"], vit_params)


@pytest.mark.parametrize("path,split", [
    ("gs://b/x.npz:img/sub", ("gs://b/x.npz", "img/sub")),
    ("gs://b/x.npz", ("gs://b/x.npz", None)),
    ("d/x.npz-000000010:img", ("d/x.npz-000000010", "img")),
    ("d/model:img/", ("d/model", "img")),
    ("d/x.npz:", ("d/x.npz:", None)),
])
def test_split_subkey(path, split):
    assert big_vision.split_subkey(path) == split


def test_renumber_pre_linen():
    tree = {"LayerNorm_0": 1, "MultiHeadDotProductAttention_1": 2, "LayerNorm_2": 3,
            "MlpBlock_3": {"Dense_0": 4, "Dense_1": 5}, "cls": 6}
    assert big_vision.renumber_pre_linen(tree) == {
        "LayerNorm_0": 1, "MultiHeadDotProductAttention_0": 2, "LayerNorm_1": 3,
        "MlpBlock_0": {"Dense_0": 4, "Dense_1": 5}, "cls": 6}
    blocks = {f"encoderblock_{i}": i for i in range(12)}  # 10 and 11 sort after 9
    assert big_vision.renumber_pre_linen(blocks) == blocks


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no big_vision .npz at .*none.npz: no such file$"):
        big_vision.load(str(tmp_path / "none.npz"))


def _tensorstore_checkpoint(tmp_path):
    # big_vision's save_checkpoint_ts: `<path>-<step:09d>` folders and a `<path>-LAST` pointer.
    step = tmp_path / "checkpoint.bv-000000010"
    step.mkdir()
    (step / "params~img~embedding~kernel").mkdir()
    (tmp_path / "checkpoint.bv-LAST").write_text("000000010")
    return step


def test_a_tensorstore_checkpoints_pointer_is_named(tmp_path):
    _tensorstore_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match="checkpoint.bv-LAST names the steps of a "
                                                "big_vision tensorstore checkpoint"):
        big_vision.load(str(tmp_path / "checkpoint.bv"))


def test_a_tensorstore_checkpoints_step_is_named(tmp_path):
    step = _tensorstore_checkpoint(tmp_path)
    with pytest.raises(ValueError, match=r"checkpoint.bv-000000010 is not a big_vision .npz: it "
                                         r"is a folder, a big_vision tensorstore checkpoint"):
        big_vision.load(str(step) + ":img")


@pytest.mark.parametrize("content,what", [
    (b"not a zip", "it is a file of unknown format"),
    (b"PK\x03\x04 truncated", "it is a damaged zip archive"),
    (b"\x93NUMPY\x01\x00", r"it is a single NumPy array \(np.save\)"),
    (b"\x80\x02}q\x00", "it is a Python pickle"),
    (b"\x10\x00\x00\x00\x00\x00\x00\x00{\"w\": {}}", "it is a safetensors file"),
    (b"", "it is an empty file"),
])
def test_not_an_npz_says_what_it_is(tmp_path, content, what):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match=f"bad.npz is not a big_vision .npz: {what}"):
        big_vision.load(str(bad) + ":img")


def test_a_pytorch_zip_is_named(tmp_path):
    bad = tmp_path / "vit.npz"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        archive.writestr("archive/data/0", b"\0" * 16)
    with pytest.raises(ValueError, match=r"vit.npz is not a big_vision .npz: it is a zip archive "
                                         r"of archive/data.pkl, archive/data/0 \(a PyTorch "):
        big_vision.load(str(bad))


def test_an_empty_npz_is_named(tmp_path):
    empty = cf.write_npz(str(tmp_path / "empty.npz"), {})
    with pytest.raises(ValueError, match="empty.npz is an empty .npz: it holds no arrays"):
        big_vision.load(empty)


def test_a_damaged_npz_is_named(tmp_path):
    damaged = tmp_path / "damaged.npz"
    with zipfile.ZipFile(damaged, "w") as archive:
        archive.writestr("w.npy", b"\x93NUMPY garbage")
    with pytest.raises(ValueError, match="damaged.npz is a damaged .npz: "):
        big_vision.load(str(damaged))


def _bilinear_align_corners(grid, new_h, new_w):
    """Independent reference: corner-aligned bilinear interpolation, [h, w, D]."""
    old_h, old_w, _ = grid.shape

    def coords(new, old):
        pos = np.arange(new) * ((old - 1) / (new - 1)) if new > 1 else np.zeros(1)
        low = np.clip(np.floor(pos).astype(int), 0, old - 1)
        high = np.clip(low + 1, 0, old - 1)
        return low, high, (pos - low)[:, None]

    y0, y1, fy = coords(new_h, old_h)
    x0, x1, fx = coords(new_w, old_w)
    out = np.empty((new_h, new_w, grid.shape[2]))
    for i in range(new_h):
        top = grid[y0[i], x0] * (1 - fx) + grid[y0[i], x1] * fx
        bottom = grid[y1[i], x0] * (1 - fx) + grid[y1[i], x1] * fx
        out[i] = top * (1 - fy[i]) + bottom * fy[i]
    return out


@pytest.mark.parametrize("old_side,new_grid", [(3, 5), (4, 7), (5, 3), (4, (6, 2))])
def test_resample_matches_bilinear_reference(old_side, new_grid):
    rng = np.random.default_rng(old_side)
    posemb = rng.standard_normal((1, old_side * old_side, 6)).astype(np.float32)
    new_h, new_w = (new_grid, new_grid) if isinstance(new_grid, int) else new_grid
    want = _bilinear_align_corners(posemb[0].reshape(old_side, old_side, 6).astype(np.float64),
                                   new_h, new_w).reshape(1, new_h * new_w, 6)
    got = big_vision.resample_posemb(posemb, new_grid)
    assert got.shape == (1, new_h * new_w, 6) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_resample_keeps_or_drops_the_class_token():
    rng = np.random.default_rng(0)
    grid = rng.standard_normal((1, 9, 4)).astype(np.float32)
    class_row = rng.standard_normal((1, 1, 4)).astype(np.float32)
    with_cls = np.concatenate([class_row, grid], axis=1)
    kept = big_vision.resample_posemb(with_cls, 5)
    assert kept.shape == (1, 26, 4)
    np.testing.assert_array_equal(kept[:, :1], class_row)
    np.testing.assert_array_equal(kept[:, 1:], big_vision.resample_posemb(grid, 5))
    dropped = big_vision.resample_posemb(with_cls, 5, keep_class_token=False)
    np.testing.assert_array_equal(dropped, kept[:, 1:])
    np.testing.assert_array_equal(big_vision.resample_posemb(grid, 3), grid)  # same grid


def test_fit_posemb_cases():
    posemb = np.arange(1 * 10 * 2, dtype=np.float32).reshape(1, 10, 2)  # 3x3 + cls
    new, dropped, how = big_vision.fit_posemb(posemb, (1, 9, 2))
    np.testing.assert_array_equal(new, posemb[:, 1:])
    np.testing.assert_array_equal(dropped, posemb[:, :1])
    assert how == "grid 3x3 kept, class-token row dropped"
    new, dropped, how = big_vision.fit_posemb(posemb, (1, 17, 2))
    assert new.shape == (1, 17, 2) and dropped is None and "3x3 -> 4x4" in how
    with pytest.raises(ValueError, match="class-token position"):
        big_vision.fit_posemb(posemb[:, 1:], (1, 10, 2))
    with pytest.raises(ValueError, match="not a square grid"):
        big_vision.fit_posemb(posemb[:, :7], (1, 9, 2))
    with pytest.raises(ValueError, match="only the number of positions"):
        big_vision.fit_posemb(posemb, (1, 9, 3))
