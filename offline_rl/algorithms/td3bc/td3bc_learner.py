"""TD3+BC's losses: clipped double-Q TD learning with target-policy smoothing, and a
deterministic actor that maximizes Q while staying close to the logged actions."""

from __future__ import annotations

import torch

from offline_rl.algorithms.td_target import td_target
from offline_rl.columns import Columns
from offline_rl.core.learner import Learner
from offline_rl.core.loss_checks import check_per_row
from offline_rl.core.optimizer_spec import OptimizerSpec


class TD3BCTorchLearner(Learner):
    """Two optimizers (``TD3BCConfig.training`` names the settings):

    - ``critic``: ``(Q_i(s, a) - (r + gamma * (1 - terminated) * min_i Q_target_i(s', a')))**2``
      for both Q, where ``a'`` is the target policy's action plus clipped Gaussian noise;
    - ``policy``, every ``policy_delay`` steps, after the critic's step and through it:
      ``-alpha * Q(s, pi(s)) / mean|Q| + ((pi(s) - a) / h)**2``, with ``pi(s)`` inside the
      action bounds (``tanh``-squashed by ``model_config`` ``bound_mean``, else clipped) and
      the behavior-cloning term measured in half-widths ``h`` of the action range, as on
      the paper's ``[-1, 1]`` actions; the targets (Q and policy) then move ``tau`` towards
      their networks.

    The delayed updates are timed by ``num_updates``, which a restored algorithm keeps.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl.algorithms.td3bc import TD3BCConfig
        >>> config = TD3BCConfig().rl_module(model_config={"fcnet_hiddens": [8]})
        >>> spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (2,), np.float32),
        ...                                  gym.spaces.Box(-1, 1, (1,), np.float32))
        >>> learner = TD3BCTorchLearner(config.learner_config(spec))
        >>> batch = {"obs": np.zeros((4, 2), np.float32), "actions": np.zeros((4, 1), np.float32),
        ...          "rewards": np.ones(4, np.float32), "new_obs": np.zeros((4, 2), np.float32),
        ...          "terminateds": np.array([False, False, False, True])}
        >>> [sorted(name for name in learner.update(batch) if name.endswith("_loss"))
        ...  for _ in range(2)]  # the policy steps on every second update
        [['critic_loss', 'total_loss'], ['bc_loss', 'critic_loss', 'policy_loss', 'total_loss']]
    """

    def configure_optimizers(self) -> dict[str, OptimizerSpec]:
        """``policy`` and ``critic`` (both Q-networks), each with its own ``lr``."""
        module, config = self.module, self.config.hyperparameters
        return {"policy": OptimizerSpec(module.policy_parameters(), config.actor_lr),
                "critic": OptimizerSpec(module.critic_parameters(), config.critic_lr)}

    def _updates_policy(self) -> bool:
        """Whether this update steps the policy and the targets (every ``policy_delay``)."""
        return (self.num_updates + 1) % self.config.hyperparameters.policy_delay == 0

    def _clip(self, actions: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(actions, self.module.action_high),
                             self.module.action_low)

    def update_stages(self) -> list[tuple[str, ...]]:
        """The critic steps, then on the policy's steps the policy, through the stepped
        critic (as the paper's update does)."""
        return [("critic",), ("policy",)] if self._updates_policy() else [("critic",)]

    def compute_losses(self, *, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
                       ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The losses of the networks ``stepping`` now (see the class)."""
        module, config = self.module, self.config.hyperparameters
        obs, actions = batch[Columns.OBS], batch[Columns.ACTIONS].float()
        half_range = (module.action_high - module.action_low) / 2
        losses, stats = {}, {}
        if "critic" in self.stepping:
            with torch.no_grad():
                next_obs = batch[Columns.NEXT_OBS]
                noise = (torch.randn_like(actions) * config.policy_noise * half_range).clamp(
                    -config.noise_clip * half_range, config.noise_clip * half_range)
                next_actions = self._clip(module.mean_actions(next_obs, target=True) + noise)
                next_q = torch.minimum(*module.q_values(next_obs, next_actions, target=True))
                target = td_target(batch, next_q, config.gamma)
            q_value, q_twin_value = module.q_values(obs, actions)
            check_per_row("critic_loss", len(obs), target=target, q_value=q_value,
                          q_twin_value=q_twin_value)
            losses["critic"] = (torch.nn.functional.mse_loss(q_value, target)
                                + torch.nn.functional.mse_loss(q_twin_value, target))
            stats.update(critic_loss=losses["critic"], mean_q=q_value.mean())
        if "policy" in self.stepping:
            policy_actions = self._clip(module.mean_actions(obs))
            q_policy, _ = module.q_values(obs, policy_actions)
            weight = config.alpha / q_policy.abs().mean().detach()
            bc_loss = ((policy_actions - actions) / half_range).pow(2).mean()
            losses["policy"] = -weight * q_policy.mean() + bc_loss
            stats.update(policy_loss=losses["policy"], bc_loss=bc_loss)
        return losses, stats

    def after_gradient_based_update(self) -> None:
        """After a policy step, moves the target Q-networks and policy ``tau`` closer."""
        if self._updates_policy():
            self.module.update_targets(self.config.hyperparameters.tau)
            self.module.update_policy_target(self.config.hyperparameters.tau)
