"""Recording policies for tests (imported by Ray actors by their module path)."""

from __future__ import annotations

import os

import numpy as np


def alternating(obs: np.ndarray):
    """A deterministic batch policy that also reports model outputs."""
    actions = (obs[:, 2] > 0).astype(np.int64)
    logp = np.full(len(obs), -0.1, np.float32)
    return actions, {"action_logp": logp,
                     "action_dist_inputs": np.zeros((len(obs), 2), np.float32)}


class DiesAfter:
    """A policy whose actor process dies abruptly after ``steps`` env steps."""

    def __init__(self, steps: int):
        self.steps = steps

    def __call__(self, obs: np.ndarray):
        self.steps -= 1
        if self.steps < 0:
            os._exit(1)
        return alternating(obs)
