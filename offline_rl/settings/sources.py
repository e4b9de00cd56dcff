"""Weighted input sources: what ``offline_data(input_=...)`` mixes, and in which shares.

Two forms mix sources (any other ``input_`` is one source):

- ``{path_or_uri: weight, ...}``: each path (or URI, or glob) read with the section's own read
  options, as RLlib's old stack's ``input`` dict;
- a list of dicts, one per source: ``{"input_": path_or_paths, "weight": w, **read options}``,
  where the read options (``SOURCE_OPTIONS``) replace the section's for that source only, so
  that sources in different formats mix.

Either form may name ``"sampler"`` (``SAMPLER``) with a weight: that share of each train batch
is experience the current policy collects online in the environment. Weights are finite
numbers above 0 (ints, floats, numpy numbers; not bools or strings); they are divided by their
sum, so ``{"a": 2, "b": 1}`` reads two rows of ``a`` for each of ``b``. The division is safe
for any such weights (``shares``: each is divided by the largest first, so ``1e308`` twice is
half and half, and ``1e-320`` alone is all); a weight too small beside another for its share
to be a float above 0 (a ratio past about ``1e308``) is refused.

``InputSpec.of`` parses any valid ``input_`` (``input_problem``) once into what its readers
need: the sources, their shares, the sampler's, the custom input.

Examples:
    >>> spec = InputSpec.of({"/data/expert": 3, "/data/medium": 1})
    >>> [(source.input_, source.weight) for source in spec.sources], spec.sampler_share
    ([('/data/expert', 0.75), ('/data/medium', 0.25)], 0.0)
    >>> mix_problem({"/data/expert": 0.5, "sampler": -1})
    "source 'sampler': the weight must be a finite number above 0, got -1"
    >>> shares([1e308, 1e308])
    [0.5, 0.5]
"""

from __future__ import annotations

import math
import numbers
import sys
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


@dataclass(frozen=True)
class InputSpec:
    """``input_`` parsed (``OfflineDataConfig.input_spec``): its offline sources, each with its
    share of a train batch and the read options it sets for itself (a plain ``input_`` is one
    source of share 1); the share of online experience (``"sampler"``; 0 without); whether
    ``input_`` is a mixing form, and the sum of its weights as given. A custom input has no
    sources when it is a callable, and is one source when it is a name ``register_input``
    registered: the data layer resolves both (``DataConfig.input_creator``).

    Examples:
        >>> spec = InputSpec.of({"/data/expert": 3, "sampler": 1})
        >>> [source.input_ for source in spec.sources], spec.sampler_share, spec.mixed
        (['/data/expert'], 0.25, True)
        >>> spec.weight_sum
        4.0
        >>> InputSpec.of(["/data/a", "/data/b"]).sources[0].name
        '/data/a (+1 more)'
    """

    sources: tuple[Source, ...] = ()
    sampler_share: float = 0.0
    mixed: bool = False
    weight_sum: float = 1.0

    @classmethod
    def of(cls, input_: Any) -> InputSpec:
        """The spec of a valid ``input_`` (``None``, a callable: no sources)."""
        if input_ is None or callable(input_):
            return cls()
        if is_mixed(input_):
            entries = _entries(input_)
            weights = [float(weight) for _, weight, _ in entries]
            parts = shares(weights)
            sources = tuple(Source(paths, share, options) for (paths, _, options), share
                            in zip(entries, parts) if paths != SAMPLER)
            sampler = math.fsum(share for (name, _, _), share in zip(entries, parts)
                                if name == SAMPLER)
            return cls(sources, sampler, mixed=True, weight_sum=sum(weights))
        return cls((Source(input_ if isinstance(input_, str) else list(input_), 1.0),))


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
        problem = weight_problem(weight)
        if problem:
            return f"source {_shown(name)}: the weight must be {problem}"
        unknown = sorted(set(options) - set(SOURCE_OPTIONS))
        if unknown:
            return (f"source {_shown(name)}: {unknown} cannot be set per source; a source may "
                    f"set {list(SOURCE_OPTIONS)}")
    if all(name == SAMPLER for name, _, _ in entries):
        return ("mixes only the sampler: give at least one offline source (offline-rl trains "
                "from recorded data, with a share of online experience at most)")
    weights = [float(weight) for _, weight, _ in entries]
    largest = entries[weights.index(max(weights))]
    for (name, weight, _), share in zip(entries, shares(weights)):
        if share == 0:
            return (f"source {_shown(name)}: the weight {weight!r} is too small beside the "
                    f"weight {largest[1]!r} of source {_shown(largest[0])}: its share of a "
                    "train batch underflows to 0 (below the smallest float); give weights "
                    "within a ratio of about 1e300 of each other, or drop the source")
    return None


def weight_problem(weight: Any) -> str | None:
    """What is wrong with one source's weight (``"a finite number above 0, got ..."``), or
    ``None``: an int, float or numpy number (not a bool) that a float holds, finite and above
    0.

    Examples:
        >>> weight_problem("1e308")
        "a finite number above 0, got '1e308' (a str: write it as a number; YAML reads 1e308 \
as a str, 1.0e+308 as a number)"
        >>> weight_problem(10 ** 400) is not None, weight_problem(1e-320)
        (True, None)
    """
    what = "a finite number above 0"
    if isinstance(weight, str):
        try:
            number = float(weight)
        except ValueError:
            number = math.nan
        hint = (f"; YAML reads {weight} as a str, {number:.1e} as a number"
                if math.isfinite(number) and "." not in weight else "")
        return f"{what}, got {weight!r} (a str: write it as a number{hint})"
    if isinstance(weight, bool):
        return f"{what}, got {weight!r} (a bool)"
    if not isinstance(weight, numbers.Real):
        return f"{what}, got {weight!r}"
    try:
        value = float(weight)
    except OverflowError:
        return (f"{what} that a float holds (at most {sys.float_info.max:.1e}), got an int of "
                f"{len(str(weight))} digits")
    if not math.isfinite(value) or value <= 0:
        return f"{what}, got {weight!r}"
    return None


def shares(weights: list[float]) -> list[float]:
    """``weights`` (finite, above 0) divided by their sum, without overflow: each is divided by
    the largest first (a share that underflows comes back 0; ``mix_problem`` refuses it)."""
    largest = max(weights)
    scaled = [weight / largest for weight in weights]
    total = math.fsum(scaled)
    return [part / total for part in scaled]


def _shown(name: Any) -> str:
    """A source as messages name it: its path, or its first path and the count of the
    others."""
    return repr(name) if isinstance(name, str) else repr(Source(name, 0.0).name)


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
