"""``OptimizerSpec``: one optimizer of a learner, and the names its metrics take."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from offline_rl.settings.learning_rates import LearningRate

#: The name of the optimizer of a learner that has one.
DEFAULT_OPTIMIZER = "default"
#: RLlib's name of that optimizer, in the key of its learning rate
#: (``default_optimizer_learning_rate``).
RLLIB_DEFAULT_OPTIMIZER = "default_optimizer"


def learning_rate_key(optimizer: str) -> str:
    """The metric of ``optimizer``'s learning rate, in RLlib's form.

    Examples:
        >>> learning_rate_key(DEFAULT_OPTIMIZER), learning_rate_key("policy")
        ('default_optimizer_learning_rate', 'policy_learning_rate')
    """
    name = RLLIB_DEFAULT_OPTIMIZER if optimizer == DEFAULT_OPTIMIZER else optimizer
    return f"{name}_learning_rate"


@dataclass
class OptimizerSpec:
    """One optimizer of a learner: the ``parameters`` it trains, its learning rate and its
    gradient clipping (``None``: the config's ``grad_clip``)."""

    parameters: list[torch.nn.Parameter]
    #: A number, or a schedule ``[[timestep, lr], ...]`` (``offline_rl.core.schedules``).
    lr: LearningRate
    grad_clip: float | None = None
