"""Weighted input sources: what ``offline_data(input_=...)`` mixes, and in which shares.

Two forms mix sources (any other ``input_`` is one source):

- ``{path_or_uri: weight, ...}``: each path (or URI, or glob) read with the section's own read
  options, as RLlib's old stack's ``input`` dict;
- a list of dicts, one per source: ``{"input_": path_or_paths, "weight": w, **read options}``,
  where the read options (``SOURCE_OPTIONS``) replace the section's for that source only, so
  that sources in different formats mix.

Either form may name ``"sampler"`` (``SAMPLER``) with a weight: that share of each train batch
is experience the current policy collects online in the environment. Weights are finite
numbers above 0; they are divided by their sum, so ``{"a": 2, "b": 1}`` reads two rows of
``a`` for each of ``b``.

Examples:
    >>> sources, sampler = weighted_sources({"/data/expert": 3, "/data/medium": 1})
    >>> [(source.input_, source.weight) for source in sources], sampler
    ([('/data/expert', 0.75), ('/data/medium', 0.25)], 0.0)
    >>> mix_problem({"/data/expert": 0.5, "sampler": -1})
    "source 'sampler': the weight must be a finite number above 0, got -1"
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The source name of online experience, collected by the current policy in the env.
SAMPLER = "sampler"
#: The ``offline_data`` options a source of the per-source form may set for itself.
SOURCE_OPTIONS = ("input_read_method", "input_read_method_kwargs", "input_read_schema",
                  "input_read_episodes", "input_read_sample_batches", "input_filesystem",
                  "input_filesystem_kwargs", "input_compress_columns")


@dataclass(frozen=True)
class Source:
    """One offline source: its path(s), its share of each train batch (the weights of all
    sources, the sampler's included, sum to 1) and the read options it sets for itself."""

    input_: str | list[str]
    weight: float
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """How results and errors name the source: its path (or its first path, and the
        count of the others)."""
        if isinstance(self.input_, str):
            return self.input_
        more = len(self.input_) - 1
        return self.input_[0] + (f" (+{more} more)" if more else "")


def is_mixed(input_: Any) -> bool:
    """Whether ``input_`` is one of the mixing forms (a dict, or a list of dicts)."""
    return isinstance(input_, Mapping) or (
        isinstance(input_, list | tuple) and bool(input_)
        and all(isinstance(item, Mapping) for item in input_))


def mix_problem(input_: Any) -> str | None:
    """What is wrong with a mixing ``input_`` (weights, paths, per-source options), or
    ``None``."""
    entries = _entries(input_)
    if isinstance(entries, str):
        return entries
    if not entries:
        return "mixes no sources: give at least one path with its weight"
    for name, weight, options in entries:
        if isinstance(weight, bool) or not isinstance(weight, int | float) \
                or not math.isfinite(weight) or weight <= 0:
            return f"source {name!r}: the weight must be a finite number above 0, got {weight!r}"
        unknown = sorted(set(options) - set(SOURCE_OPTIONS))
        if unknown:
            return (f"source {name!r}: {unknown} cannot be set per source; a source may set "
                    f"{list(SOURCE_OPTIONS)}")
    if all(name == SAMPLER for name, _, _ in entries):
        return ("mixes only the sampler: give at least one offline source (offline-rl trains "
                "from recorded data, with a share of online experience at most)")
    return None


def weighted_sources(input_: Any) -> tuple[list[Source], float]:
    """The offline sources of a mixing ``input_`` (checked: ``mix_problem``) with their
    weights divided by the sum of all weights, and the sampler's share (0 without one)."""
    entries = _entries(input_)
    total = sum(weight for _, weight, _ in entries)
    sources = [Source(paths, weight / total, options)
               for paths, weight, options in entries if paths != SAMPLER]
    sampler = sum(weight for name, weight, _ in entries if name == SAMPLER) / total
    return sources, sampler


def _entries(input_: Any) -> list[tuple[Any, Any, dict[str, Any]]] | str:
    """``(path(s), weight, read options)`` per source, or what is wrong with the form."""
    if isinstance(input_, Mapping):
        for path in input_:
            if not isinstance(path, str) or not path:
                return f"source {path!r}: name each source by its path or URI (a str)"
        return [(path, weight, {}) for path, weight in input_.items()]
    entries = []
    for index, item in enumerate(input_):
        options = {key: value for key, value in item.items() if key not in ("input_", "weight")}
        paths = item.get("input_")
        if paths == SAMPLER and options:
            return f"source {index} ('sampler'): the sampler takes no read options"
        if not (isinstance(paths, str) and paths) and not (
                isinstance(paths, list | tuple) and paths
                and all(isinstance(path, str) and path for path in paths)):
            return (f"source {index}: 'input_' must be a path or URI (or a list of them), got "
                    f"{paths!r}")
        if "weight" not in item:
            return f"source {index} ({paths!r}): give its 'weight'"
        entries.append((paths if isinstance(paths, str) else list(paths), item["weight"],
                        options))
    return entries
