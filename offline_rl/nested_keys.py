"""RLlib's flat keys for nested dicts (``ray.rllib.utils.flatten_dict``/``unflatten_dict``):
``{"default_policy": {"obs": x}}`` <-> ``{"default_policy/obs": x}``, as a PreLearner's
``__call__`` returns a batch of each module's columns.

Examples:
    >>> flatten_dict({"default_policy": {"obs": 1, "actions": 2}, "steps": 3})
    {'default_policy/obs': 1, 'default_policy/actions': 2, 'steps': 3}
    >>> unflatten_dict({"default_policy/obs": 1, "steps": 3})
    {'default_policy': {'obs': 1}, 'steps': 3}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: What joins a nested key's parts.
DELIMITER = "/"


def flatten_dict(nested: Mapping[str, Any], delimiter: str = DELIMITER) -> dict[str, Any]:
    """``nested`` with every inner mapping's keys joined to its own key by ``delimiter``."""
    flat: dict[str, Any] = {}
    for key, value in nested.items():
        if isinstance(value, Mapping):
            for inner, leaf in flatten_dict(value, delimiter).items():
                flat[f"{key}{delimiter}{inner}"] = leaf
        else:
            flat[key] = value
    return flat


def unflatten_dict(flat: Mapping[str, Any], delimiter: str = DELIMITER) -> dict[str, Any]:
    """``flat`` with each key split at ``delimiter`` into nested dicts (``flatten_dict``'s
    inverse)."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        *outer, last = str(key).split(delimiter)
        node = nested
        for part in outer:
            node = node.setdefault(part, {})
        node[last] = value
    return nested
