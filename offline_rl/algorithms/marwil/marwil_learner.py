"""MARWIL's loss: advantage-weighted log-likelihood of the logged actions plus a value loss."""

from __future__ import annotations

from typing import Any

import torch

from offline_rl.columns import Columns
from offline_rl.core.learner import Learner
from offline_rl.core.learner_config import LearnerConfig
from offline_rl.core.loss_checks import check_per_row
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.names import POLICY_LOSS_KEY, VF_LOSS_KEY


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The mean of ``values`` where ``mask`` is true (all of them without a mask).

    Examples:
        >>> masked_mean(torch.tensor([1.0, 2.0, 9.0]), torch.tensor([True, True, False]))
        tensor(1.5000)
    """
    return values.mean() if mask is None else values[mask].mean()


class MARWILTorchLearner(Learner):
    """One optimizer on ``policy_loss + vf_coeff * vf_loss`` (``MARWILConfig.training``
    names the settings), both averaged over the rows ``loss_mask`` keeps:

    - ``vf_loss = 0.5 * (value_targets - V(s))**2``, the targets from
      ``GeneralAdvantageEstimation`` in the PreLearners;
    - ``policy_loss = -exp(beta * A / c) * log pi(a|s)`` with ``A = value_targets - V(s)``
      (not differentiated) and ``c`` the square root of a moving average of ``A**2``, which
      is part of the learner's state (checkpoints); with ``beta = 0`` it is behavior
      cloning's loss and the value function is not trained.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl.algorithms.marwil import MARWILConfig
        >>> config = MARWILConfig().rl_module(model_config={"fcnet_hiddens": [8]})
        >>> spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (2,), np.float32),
        ...                                  gym.spaces.Discrete(2))
        >>> learner = MARWILTorchLearner(config.learner_config(spec))
        >>> batch = {"obs": np.zeros((3, 2), np.float32), "actions": np.array([0, 1, 1]),
        ...          "value_targets": np.ones(3, np.float32),
        ...          "loss_mask": np.array([True, True, False])}
        >>> sorted(name for name in learner.update(batch) if name.endswith("loss"))
        ['policy_loss', 'total_loss', 'vf_loss']
    """

    def __init__(self, config: LearnerConfig, module_spec: RLModuleSpec | None = None) -> None:
        super().__init__(config, module_spec)
        self.moving_avg_sqd_adv_norm = torch.tensor(
            config.hyperparameters.moving_average_sqd_adv_norm_start, device=self.device)

    def compute_loss_for_module(self, *, module_id, batch, fwd_out):
        """The policy and value losses (see the class)."""
        config, module = self.config.hyperparameters, self.module
        mask = batch.get(Columns.LOSS_MASK)
        dist = module.get_train_action_dist_cls().from_logits(
            fwd_out[Columns.ACTION_DIST_INPUTS])
        logp = dist.logp(batch[Columns.ACTIONS])
        rows = len(batch[Columns.ACTIONS])
        check_per_row(POLICY_LOSS_KEY, rows, logp=logp)
        if config.beta == 0:
            policy_loss = -masked_mean(logp, mask)
            return policy_loss, {POLICY_LOSS_KEY: policy_loss}
        values = module.compute_values(batch)
        check_per_row(VF_LOSS_KEY, rows, value_targets=batch[Columns.VALUE_TARGETS], values=values)
        advantages = batch[Columns.VALUE_TARGETS] - values
        squared_advantages = masked_mean(advantages.pow(2), mask)
        vf_loss = 0.5 * squared_advantages
        self.moving_avg_sqd_adv_norm += config.moving_average_sqd_adv_norm_update_rate * (
            squared_advantages.detach() - self.moving_avg_sqd_adv_norm)
        weights = torch.exp(config.beta * advantages.detach()
                            / (1e-8 + self.moving_avg_sqd_adv_norm.sqrt()))
        policy_loss = -masked_mean(weights * logp, mask)
        stats = {POLICY_LOSS_KEY: policy_loss, VF_LOSS_KEY: vf_loss,
                 "mean_advantage_weight": masked_mean(weights, mask),
                 "moving_avg_sqd_adv_norm": self.moving_avg_sqd_adv_norm.clone()}
        return policy_loss + config.vf_coeff * vf_loss, stats

    def training_state(self) -> dict[str, Any]:
        """The base state plus the moving average of the squared advantages."""
        return {**super().training_state(), "moving_avg_sqd_adv_norm": self.moving_avg_sqd_adv_norm}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores what ``get_state`` returned."""
        super().set_state(state)
        if "moving_avg_sqd_adv_norm" in state:
            self.moving_avg_sqd_adv_norm = torch.as_tensor(
                state["moving_avg_sqd_adv_norm"], device=self.device).clone()
