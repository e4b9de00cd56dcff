"""The temporal-difference target ``r + gamma ** n * (1 - terminated) * next_value`` the
TD algorithms' learners regress on."""

from __future__ import annotations

import torch

from offline_rl.columns import Columns


def td_target(batch: dict[str, torch.Tensor], next_value: torch.Tensor,
              gamma: float) -> torch.Tensor:
    """``r + gamma ** n * (1 - terminated) * next_value``, where ``n`` is the batch's
    ``n_step`` column (1 without one).

    Examples:
        >>> batch = {"rewards": torch.tensor([1.0, 1.0]), "terminateds": torch.tensor([0, 1]),
        ...          "n_step": torch.tensor([2, 1])}
        >>> td_target(batch, torch.tensor([10.0, 10.0]), gamma=0.5)
        tensor([3.5000, 1.0000])
    """
    discount = gamma ** batch[Columns.N_STEP].float() if Columns.N_STEP in batch else gamma
    not_done = 1.0 - batch[Columns.TERMINATEDS].float()
    return batch[Columns.REWARDS].float() + discount * not_done * next_value


def min_q(values: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The element-wise minimum of one or more Q-value tensors (twin critics, or one)."""
    least = values[0]
    for value in values[1:]:
        least = torch.minimum(least, value)
    return least
