"""Nested parameter dicts <-> flat {'a/b/c': leaf} dicts, as checkpoints store them.

One pair of functions for the loaders (`t5x`, `big_vision`), `merge` and the
test writers, so that paths are joined and conflicts reported alike.
"""

from collections.abc import Callable, Mapping
from typing import Any

SEP = "/"


def flatten_tree(tree: Mapping[str, Any], prefix: str = "",
                 is_leaf: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """Flattens nested dicts into {'a/b/c': leaf}.

    Args:
        tree: nested mappings with non-mapping leaves.
        prefix: prepended (with '/') to every path.
        is_leaf: optional test of a mapping that is a leaf nonetheless (e.g. a
            tensorstore spec in a T5X checkpoint).

    Returns:
        A flat dict from '/'-joined paths to leaves, in the tree's order.
    """
    flat = {}
    for key, value in tree.items():
        path = f"{prefix}{SEP}{key}" if prefix else str(key)
        if isinstance(value, Mapping) and not (is_leaf is not None and is_leaf(value)):
            flat.update(flatten_tree(value, path, is_leaf))
        else:
            flat[path] = value
    return flat


def unflatten_tree(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of `flatten_tree`: {'a/b': x} -> {'a': {'b': x}}.

    Args:
        flat: '/'-joined paths to leaves.

    Returns:
        Nested dicts.

    Raises:
        ValueError: a path is both a leaf and a prefix of another path.
    """
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
