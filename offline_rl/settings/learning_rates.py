"""Learning rates in RLlib's format, as configs hold them: a number, or a piecewise-linear
schedule ``[[timestep, value], ...]`` whose timesteps start at 0 and ascend (``core.schedules``
evaluates them)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

#: A learning rate: a number, or ``[[timestep, value], ...]``.
LearningRate = float | Sequence[Sequence[float]]


def is_schedule(value: Any) -> bool:
    """Whether a learning rate is a schedule (rather than a number)."""
    return isinstance(value, Sequence) and not isinstance(value, str)


def learning_rate_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as a learning rate, or ``None``.

    Examples:
        >>> learning_rate_problem([[0, 1e-3], [10_000, 1e-4]]) is None
        True
        >>> learning_rate_problem([[100, 1e-3]])
        'a schedule must start at timestep 0, got [[100, 0.001]]'
    """
    if not is_schedule(value):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return (None if number and 0 < value < math.inf
                else f"must be a finite number > 0, got {value!r}")
    points = [list(point) if is_schedule(point) else point for point in value]
    if not points or any(not isinstance(point, list) or len(point) != 2 for point in points):
        return f"a schedule is a list of [timestep, learning_rate] pairs, got {value!r}"
    timesteps, rates = zip(*points)
    if any(isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x)
           for x in timesteps + rates):
        return f"a schedule's timesteps and learning rates are finite numbers, got {value!r}"
    if timesteps[0] != 0:
        return f"a schedule must start at timestep 0, got {points!r}"
    if any(later <= earlier for earlier, later in itertools.pairwise(timesteps)):
        return f"a schedule's timesteps must ascend, got {points!r}"
    if any(rate < 0 for rate in rates) or rates[0] == 0:
        return f"a schedule's learning rates must be >= 0 and start > 0, got {points!r}"
    return None
