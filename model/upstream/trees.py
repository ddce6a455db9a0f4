"""Nested parameter dicts <-> flat {'a/b/c': leaf} dicts, as checkpoints store them."""

from collections.abc import Callable, Mapping
from typing import Any

SEP = "/"


def flatten_tree(tree: Mapping[str, Any], prefix: str = "",
                 is_leaf: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """{'a/b/c': leaf}, in order; `is_leaf` marks mappings that are leaves (tensorstore specs)."""
    flat = {}
    for key, value in tree.items():
        path = f"{prefix}{SEP}{key}" if prefix else str(key)
        if isinstance(value, Mapping) and not (is_leaf is not None and is_leaf(value)):
            flat.update(flatten_tree(value, path, is_leaf))
        else:
            flat[path] = value
    return flat


def unflatten_tree(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{'a/b': x} -> {'a': {'b': x}}; ValueError for a path both a leaf and a parent."""
    tree: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, leaf = path.split(SEP)
        node = tree
        for depth, key in enumerate(parents):
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ValueError(
                    f"parameter {SEP.join(parents[:depth + 1])!r} is both an array and "
                    f"the parent of {path!r}")
        if isinstance(node.get(leaf), dict):
            raise ValueError(f"parameter {path!r} is both an array and a parent of others")
        node[leaf] = value
    return tree
