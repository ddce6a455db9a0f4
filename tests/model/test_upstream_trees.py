"""Flat '/'-path dicts <-> nested trees, shared by the checkpoint loaders."""

import numpy as np
import pytest

from model.upstream import big_vision, trees


def test_flatten_tree_stops_at_the_leaves_given():
    tree = {"a": {"b": 1, "c": {"d": 2}}, "e": {"spec": True}}
    flat = trees.flatten_tree(tree, is_leaf=lambda node: "spec" in node)
    assert flat == {"a/b": 1, "a/c/d": 2, "e": {"spec": True}}


def test_unflatten_tree_round_trips():
    tree = {"a": {"b": 1, "c": {"d": 2}}, "e": {"spec": True}}
    flat = trees.flatten_tree(tree, is_leaf=lambda node: "spec" in node)
    assert trees.unflatten_tree(flat) == tree


def test_flatten_tree_prefixes_the_paths():
    assert trees.flatten_tree({"x": 1}, prefix="p") == {"p/x": 1}


def test_a_path_that_is_a_leaf_with_children_is_an_error():
    for flat in ({"a/b": 1, "a/b/c": 2}, {"a/b/c": 2, "a/b": 1}):
        with pytest.raises(ValueError, match="both an array and"):
            trees.unflatten_tree(flat)


def test_a_path_that_is_a_leaf_with_children_names_big_visions_file(tmp_path):
    path = str(tmp_path / "bad.npz")
    np.savez(path, **{"a/b": np.zeros(2), "a/b/c": np.zeros(2)})
    with pytest.raises(ValueError, match=r"bad\.npz: parameter 'a/b' is both an array"):
        big_vision.load(path)
