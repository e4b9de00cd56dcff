"""Learning rates that change during training, in RLlib's schedule format.

A learning rate is a number, or a piecewise-linear schedule ``[[timestep, value], ...]`` whose
timesteps start at 0 and ascend; past the last point it stays at the last value. As in RLlib,
the timestep counts env steps: here the rows trained on so far, over all learners.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: A learning rate: a number, or ``[[timestep, value], ...]``.
LearningRate = float | Sequence[Sequence[float]]


def is_schedule(value: Any) -> bool:
    """Whether a learning rate is a schedule (rather than a number)."""
    return isinstance(value, Sequence) and not isinstance(value, str)


def learning_rate_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as a learning rate, or ``None``.

    Example:
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


def learning_rate_at(value: LearningRate, timestep: int) -> float:
    """The learning rate at ``timestep`` (linear between a schedule's points).

    Example:
        >>> learning_rate_at([[0, 1e-3], [1000, 0.0]], 250)
        0.00075
        >>> learning_rate_at([[0, 1e-3], [1000, 0.0]], 5000), learning_rate_at(3e-4, 5000)
        (0.0, 0.0003)
    """
    if not is_schedule(value):
        return float(value)
    timesteps, rates = zip(*value)
    return float(np.interp(timestep, timesteps, rates))


def cosine_schedule(lr: float, timesteps: int, points: int = 50) -> list[list[float]]:
    """A cosine decay from ``lr`` at timestep 0 to 0 at ``timesteps``, as a piecewise-linear
    schedule of ``points`` segments (the IQL paper's policy schedule, in RLlib's format). For
    ``U`` updates of ``B`` rows on ``N`` learners, ``timesteps`` is ``U * B * N``.

    Example:
        >>> schedule = cosine_schedule(3e-4, 1000, points=4)
        >>> [[step, round(rate, 8)] for step, rate in schedule]
        [[0, 0.0003], [250, 0.00025607], [500, 0.00015], [750, 4.393e-05], [1000, 0.0]]
        >>> learning_rate_problem(schedule) is None
        True
    """
    return [[round(timesteps * k / points), lr * (1 + math.cos(math.pi * k / points)) / 2]
            for k in range(points + 1)]
