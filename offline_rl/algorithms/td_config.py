"""What the temporal-difference algorithms' hyperparameters share: the discount and n-step
returns (their target is ``td_target``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from offline_rl.settings.hyperparameters import Hyperparameters
from offline_rl.settings.options import (
    A_BOOL,
    AN_INT_AT_LEAST_0,
    AN_INT_AT_LEAST_1,
    finite_number,
    option,
)

#: Checks shared by the algorithms' hyperparameters.
A_DISCOUNT = finite_number("in [0, 1]", lambda value: 0 <= value <= 1)
A_POLYAK_COEFFICIENT = finite_number("in (0, 1]", lambda value: 0 < value <= 1)
POSITIVE = finite_number("> 0", lambda value: value > 0)
NON_NEGATIVE = finite_number(">= 0", lambda value: value >= 0)


@dataclass
class TDHyperparameters(Hyperparameters):
    """The discount ``gamma`` and ``n_step``: with ``n_step > 1`` the PreLearners sample
    n-step transitions (rewards discounted over up to ``n_step`` steps, the observation
    ``n_step`` steps later) with an ``n_step`` column of the steps taken; that needs inputs of
    whole episodes (``AlgorithmConfig.problems`` checks it).

    Examples:
        >>> TDHyperparameters(gamma=1.5).problems()
        [('gamma', 'must be a finite number in [0, 1], got 1.5')]
    """

    #: The discount of future rewards.
    gamma: float = option(0.99, A_DISCOUNT)
    #: Steps per TD target (> 1: n-step targets, for inputs of whole episodes).
    n_step: int = option(1, AN_INT_AT_LEAST_1)

    def n_step_returns(self) -> tuple[int, float]:
        """``(n_step, gamma)``."""
        return self.n_step, self.gamma


@dataclass
class TwinQHyperparameters(TDHyperparameters):
    """RLlib's SAC-family critic options: ``twin_q`` (two Q-networks, the minimum of whose
    values is used; ``False``: the first alone) and ``target_network_update_freq`` (rows
    trained on between two Polyak updates of the target Q-networks; at most a train batch:
    after every update, as RLlib's 0)."""

    twin_q: bool = option(True, A_BOOL)
    target_network_update_freq: int = option(0, AN_INT_AT_LEAST_0)

    def updates_target_now(self, num_updates: int, batch_size: int) -> bool:
        """Whether update number ``num_updates`` (counted from 1) moves the targets."""
        every = max(1, math.ceil(self.target_network_update_freq / batch_size))
        return num_updates % every == 0
