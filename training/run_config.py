"""The resolved config saved with a run, and the check that a resumed run still matches it.

Resuming a checkpoint with another model, optimizer, data or seed would either
fail deep inside orbax (shapes) or, worse, silently train something else. So
the fields below must equal those of the saved `config.json`, unless the user
passes `--allow_config_change`.
"""

import json
import os

# Dotted prefixes of fields that change the state's shapes, the data order or the maths.
INCOMPATIBLE = ("model", "optimizer", "vocab", "data", "seed", "batch_size", "lr", "z_loss",
                "label_smoothing", "init")


def _flatten(tree, prefix=""):
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _normalize(value):
    return list(value) if isinstance(value, tuple) else value


def incompatible_changes(saved, current):
    """Returns ["field: saved -> current", ...] for fields of INCOMPATIBLE that differ."""
    saved, current = _flatten(saved), _flatten(current)
    changes = []
    for name in sorted(set(saved) | set(current)):
        if name.split(".")[0] not in INCOMPATIBLE:
            continue
        old, new = _normalize(saved.get(name)), _normalize(current.get(name))
        if old != new:
            changes.append(f"{name}: {old!r} -> {new!r}")
    return changes


def path(workdir):
    return os.path.join(workdir, "config.json")


def load(workdir):
    """The saved config as a dict, or None when the run has none."""
    if not os.path.exists(path(workdir)):
        return None
    with open(path(workdir), encoding="utf-8") as f:
        return json.load(f)


def save(workdir, config):
    """Writes the resolved config atomically (a crash never leaves half a file)."""
    tmp = path(workdir) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(config.to_json(indent=2))
    os.replace(tmp, path(workdir))
