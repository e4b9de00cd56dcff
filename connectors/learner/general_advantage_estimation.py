"""``GeneralAdvantageEstimation``: advantages and value targets from the module's values."""

from __future__ import annotations

from typing import Any

import numpy as np

from connectors.connector_v2 import ConnectorV2
from offline_rl.columns import Columns
from offline_rl.errors import ConfigError


def generalized_advantages(values: np.ndarray, rewards: np.ndarray, terminateds: np.ndarray,
                           loss_mask: np.ndarray, gamma: float, lambda_: float
                           ) -> tuple[np.ndarray, np.ndarray]:
    """GAE (Schulman et al., 2016) over a flat batch of episodes, each ending in an artificial
    timestep (``loss_mask`` False) whose value bootstraps the episode's last real step:
    ``delta_t = r_t + gamma * (1 - terminated_t) * V_{t+1} - V_t`` and
    ``A_t = delta_t + gamma * lambda_ * (1 - terminated_t) * A_{t+1}``, with ``A = 0`` on the
    artificial steps. Returns ``(advantages, value_targets = advantages + values)``.

    Example (one episode of two steps, then its artificial step; hand-computed):
        >>> values, rewards = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 0.0])
        >>> terminateds, mask = np.array([False, False, True]), np.array([True, True, False])
        >>> advantages, targets = generalized_advantages(values, rewards, terminateds, mask,
        ...                                              gamma=0.5, lambda_=0.5)
        >>> advantages.tolist()  # delta = [1 + 0.5*2 - 1, 1 + 0.5*3 - 2] = [1, 0.5]
        [1.125, 0.5, 0.0]
        >>> targets.tolist()
        [2.125, 2.5, 3.0]
    """
    real = np.asarray(loss_mask, bool)
    if len(real) and real[-1]:
        raise ConfigError("GeneralAdvantageEstimation needs every episode to end in the "
                          "artificial timestep AddOneTsToEpisodesAndTruncate adds (loss_mask "
                          "False); prepend that piece to the learner pipeline")
    values = np.asarray(values, np.float64)
    continues = ~np.asarray(terminateds, bool)
    next_values = np.append(values[1:], 0.0)
    deltas = np.where(real, rewards + gamma * continues * next_values - values, 0.0)
    carry = gamma * lambda_ * continues
    # A_t = delta_t + carry_t * A_{t+1}, solved backwards one step per pass: after k passes
    # the last k real steps of every episode are exact (A is 0 on the artificial steps).
    ends = np.flatnonzero(~real)
    longest = int(np.max(np.diff(ends, prepend=-1) - 1, initial=0))
    advantages = deltas
    for _ in range(longest - 1):
        advantages = deltas + carry * np.append(advantages[1:], 0.0)
    return advantages.astype(np.float32), (advantages + values).astype(np.float32)


class GeneralAdvantageEstimation(ConnectorV2):
    """Runs the module's value function (``rl_module.compute_values``) over the batch's
    ``obs`` and adds ``vf_preds``, ``advantages`` and ``value_targets``
    (``generalized_advantages``). It needs the artificial last timestep of
    ``AddOneTsToEpisodesAndTruncate`` and the default pieces' ``rewards`` and
    ``terminateds``, so it goes last (``pipeline.append``). It reads the module
    (``needs_module``): PreLearners keep a copy refreshed from the learners, so the data
    pipeline cannot be materialized after mapping (``materialize_mapped_data=False``).

    Examples:
        >>> import torch
        >>> class ValueOfObs(torch.nn.Module):
        ...     def compute_values(self, batch):
        ...         return batch["obs"].float()
        >>> batch = {"obs": np.array([1.0, 2.0, 3.0]), "rewards": np.array([1.0, 1.0, 0.0]),
        ...          "terminateds": np.array([False, False, True]),
        ...          "loss_mask": np.array([True, True, False])}
        >>> piece = GeneralAdvantageEstimation(gamma=0.5, lambda_=0.5)
        >>> piece(rl_module=ValueOfObs(), batch=batch, episodes=[])["value_targets"].tolist()
        [2.125, 2.5, 3.0]
    """

    needs_episodes = False  # reads only the flat batch

    needs_module = True

    def __init__(self, input_observation_space=None, input_action_space=None, *,
                 gamma: float = 0.99, lambda_: float = 1.0, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.gamma = gamma
        self.lambda_ = lambda_

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        import torch

        missing = [column for column in (Columns.OBS, Columns.REWARDS, Columns.TERMINATEDS,
                                          Columns.LOSS_MASK) if column not in batch]
        if missing:
            raise ConfigError(f"GeneralAdvantageEstimation needs the columns {missing}: put it "
                              "last in the learner pipeline, after the default pieces, with "
                              "AddOneTsToEpisodesAndTruncate first")
        with torch.no_grad():
            obs = torch.as_tensor(np.asarray(batch[Columns.OBS]))
            values = rl_module.compute_values({Columns.OBS: obs}).cpu().numpy()
        batch[Columns.VF_PREDS] = values.astype(np.float32)
        batch[Columns.ADVANTAGES], batch[Columns.VALUE_TARGETS] = generalized_advantages(
            values, np.asarray(batch[Columns.REWARDS], np.float64), batch[Columns.TERMINATEDS],
            batch[Columns.LOSS_MASK], self.gamma, self.lambda_)
        return batch

    def __repr__(self) -> str:
        return f"GeneralAdvantageEstimation(gamma={self.gamma}, lambda_={self.lambda_})"
