"""Learning rates that change during training, in RLlib's schedule format.

A learning rate is a number, or a piecewise-linear schedule ``[[timestep, value], ...]`` whose
timesteps start at 0 and ascend; past the last point it stays at the last value. As in RLlib,
the timestep counts env steps: here the rows trained on so far, over all learners.
"""

from __future__ import annotations

import math

import numpy as np

from offline_rl.settings.learning_rates import LearningRate, is_schedule


def learning_rate_at(value: LearningRate, timestep: int) -> float:
    """The learning rate at ``timestep`` (linear between a schedule's points).

    Examples:
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

    Examples:
        >>> schedule = cosine_schedule(3e-4, 1000, points=4)
        >>> [[step, round(rate, 8)] for step, rate in schedule]
        [[0, 0.0003], [250, 0.00025607], [500, 0.00015], [750, 4.393e-05], [1000, 0.0]]
        >>> from offline_rl.settings.learning_rates import learning_rate_problem
        >>> learning_rate_problem(schedule) is None
        True
    """
    return [[round(timesteps * k / points), lr * (1 + math.cos(math.pi * k / points)) / 2]
            for k in range(points + 1)]
