"""IQL's losses: an expectile value loss, a TD loss for twin Q-networks, and advantage-weighted
regression of the policy onto the logged actions."""

from __future__ import annotations

import torch

from offline_rl.algorithms.td_target import min_q, td_target
from offline_rl.columns import Columns
from offline_rl.core.learner import Learner
from offline_rl.core.loss_checks import check_per_row
from offline_rl.core.optimizer_spec import OptimizerSpec
from offline_rl.names import POLICY_LOSS_KEY


def expectile_loss(differences: torch.Tensor, expectile: float) -> torch.Tensor:
    """``mean(|expectile - 1(u < 0)| * u**2)`` of ``u = differences``: an asymmetric squared
    loss whose minimizer over a constant is the ``expectile`` of the differences' targets.

    Examples:
        >>> round(expectile_loss(torch.tensor([1.0, -2.0]), 0.7).item(), 6)  # (0.7 + 0.3 * 4) / 2
        0.95
    """
    weight = torch.abs(expectile - (differences < 0).float())
    return (weight * differences.pow(2)).mean()


class IQLTorchLearner(Learner):
    """Three optimizers, each on its own loss (``IQLConfig.training`` names the settings):

    - ``value``: ``expectile_loss(min(Q_target(s, a)) - V(s))``;
    - ``critic``: ``(Q_i(s, a) - (r + gamma * (1 - terminated) * V(s')))**2`` for both Q;
    - ``policy``: ``-exp(beta * (min(Q_target(s, a)) - V(s))) * log pi(a|s)``, the weight
      capped at ``max_advantage_weight``;

    then the target Q-networks move ``tau`` towards the Q-networks.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl.algorithms.iql import IQLConfig
        >>> config = IQLConfig().rl_module(model_config={"fcnet_hiddens": [8]})
        >>> spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (2,), np.float32),
        ...                                  gym.spaces.Discrete(2))
        >>> learner = IQLTorchLearner(config.learner_config(spec))
        >>> batch = {"obs": np.zeros((4, 2), np.float32), "actions": np.array([0, 1, 0, 1]),
        ...          "rewards": np.ones(4, np.float32), "new_obs": np.zeros((4, 2), np.float32),
        ...          "terminateds": np.array([False, False, False, True])}
        >>> metrics = learner.update(batch)
        >>> sorted(name for name in metrics if name.endswith("_loss"))
        ['critic_loss', 'policy_loss', 'total_loss', 'value_loss']
    """

    def configure_optimizers(self) -> dict[str, OptimizerSpec]:
        """``policy``, ``critic`` (both Q-networks) and ``value``, each with its own ``lr``."""
        module, config = self.module, self.config.hyperparameters
        return {"policy": OptimizerSpec(module.policy_parameters(), config.actor_lr),
                "critic": OptimizerSpec(module.critic_parameters(), config.critic_lr),
                "value": OptimizerSpec(list(module.vf.parameters()), config.value_lr)}

    def compute_losses(self, *, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
                       ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The three losses (see the class) and what to report of them."""
        module, config = self.module, self.config.hyperparameters
        obs, actions = batch[Columns.OBS], batch[Columns.ACTIONS]
        with torch.no_grad():
            target_q = min_q(module.q_values(obs, actions, target=True, twin=config.twin_q))
            target = td_target(batch, module.state_value(batch[Columns.NEXT_OBS]), config.gamma)
        value = module.state_value(obs)
        value_loss = expectile_loss(target_q - value, config.expectile)
        q_values = module.q_values(obs, actions, twin=config.twin_q)
        critic_loss = sum(torch.nn.functional.mse_loss(q, target) for q in q_values)
        weights = torch.exp(config.beta * (target_q - value.detach())).clamp(
            max=config.max_advantage_weight)
        dist = module.get_train_action_dist_cls().from_logits(
            fwd_out[Columns.ACTION_DIST_INPUTS])
        logp = dist.logp(actions)
        check_per_row("IQL's losses", len(actions), target_q=target_q, target=target,
                      value=value, logp=logp, **dict(zip(("q_value", "q_twin_value"), q_values)))
        policy_loss = -(weights * logp).mean()
        losses = {"policy": policy_loss, "critic": critic_loss, "value": value_loss}
        stats = {POLICY_LOSS_KEY: policy_loss, "critic_loss": critic_loss, "value_loss": value_loss,
                 "mean_q": q_values[0].mean(), "mean_advantage_weight": weights.mean()}
        return losses, stats

    def after_gradient_based_update(self) -> None:
        """Moves the target Q-networks ``tau`` towards the Q-networks (every update, or as
        ``target_network_update_freq`` says)."""
        config = self.config.hyperparameters
        if config.updates_target_now(self.num_updates + 1,
                                     self.config.training.train_batch_size_per_learner):
            self.module.update_targets(config.tau)
