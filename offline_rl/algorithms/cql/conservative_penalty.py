"""CQL's conservative penalty, shared by its discrete and continuous learners."""

from __future__ import annotations

import torch


def conservative_penalty(candidate_q: torch.Tensor, data_q: torch.Tensor,
                         temperature: float = 1.0) -> torch.Tensor:
    """``mean(temperature * logsumexp(candidate_q / temperature) - data_q)``: a soft maximum
    of each row's candidate action values (every action's, when actions are discrete) less
    the value of the logged action; large when actions the data does not take look better.

    Examples:
        >>> q = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
        >>> taken = torch.tensor([1.0, 0.0])  # Q(s, a_data): actions 0 and 1
        >>> round(conservative_penalty(q, taken).item(), 4)  # (1.3133 + 0.6931) / 2
        1.0032
    """
    soft_max = temperature * torch.logsumexp(candidate_q / temperature, dim=1)
    return (soft_max - data_q).mean()
