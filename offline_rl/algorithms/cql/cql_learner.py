"""Continuous CQL's losses: soft actor-critic with the conservative penalty in the critic's
loss, an entropy temperature tuned to a target entropy, and an optional Lagrange multiplier."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from offline_rl.algorithms.cql.conservative_penalty import conservative_penalty
from offline_rl.algorithms.td_target import min_q, td_target
from offline_rl.columns import Columns
from offline_rl.core.learner import Learner
from offline_rl.core.loss_checks import check_per_row
from offline_rl.core.optimizer_spec import OptimizerSpec
from offline_rl.names import POLICY_LOSS_KEY

#: The largest Lagrange multiplier of the conservative penalty (as in the CQL paper's code).
MAX_LAGRANGE_MULTIPLIER = 1e6


class CQLTorchLearner(Learner):
    """Optimizers ``policy``, ``critic``, ``alpha`` (and ``lagrange`` with ``lagrangian``),
    each on its own loss (``CQLConfig.training`` names the settings):

    - ``critic``: for both Q, ``(Q_i(s, a) - y)**2`` with
      ``y = r + gamma * (1 - terminated) * min_i Q_target_i(s', a')`` at the policy's mean
      (squashed) action ``a'`` in ``s'``; with ``soft_q_backup``, at ``a' ~ pi(s')`` less
      ``alpha * log pi(a'|s')`` (SAC's target). Plus ``min_q_weight`` (times the
      Lagrange multiplier) times ``conservative_penalty`` over ``num_actions`` uniform
      actions, policy actions at ``s`` and policy actions at ``s'``, each less its
      log-density;
    - ``policy``: ``alpha * log pi(a~|s) - min_i Q_i(s, a~)`` with ``a~ ~ pi(s)``
      reparameterized; behavior cloning ``alpha * log pi(a~|s) - log pi(a|s)`` for the first
      ``bc_iters`` updates;
    - ``alpha``: ``-log_alpha * (log pi(a~|s) + target_entropy)``;
    - ``lagrange``: ``-multiplier * (penalty - lagrangian_thresh)``, so the multiplier grows
      while the penalty exceeds the threshold.

    The target Q-networks then move ``tau`` towards the Q-networks. The temperature and the
    multiplier are part of the learner's state (checkpoints).

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl.algorithms.cql import CQLConfig
        >>> config = CQLConfig().training(lagrangian=True, num_actions=2).rl_module(
        ...     model_config={"fcnet_hiddens": [8]})
        >>> spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (2,), np.float32),
        ...                                  gym.spaces.Box(-2, 2, (1,), np.float32))
        >>> learner = CQLTorchLearner(config.learner_config(spec))
        >>> batch = {"obs": np.zeros((4, 2), np.float32), "actions": np.ones((4, 1), np.float32),
        ...          "rewards": np.ones(4, np.float32), "new_obs": np.zeros((4, 2), np.float32),
        ...          "terminateds": np.array([False, False, False, True])}
        >>> sorted(name for name in learner.update(batch) if name.endswith("_loss"))
        ['alpha_loss', 'cql_loss', 'critic_loss', 'lagrange_loss', 'policy_loss', 'td_loss',
         'total_loss']
    """

    def configure_optimizers(self) -> dict[str, OptimizerSpec]:
        """``policy``, ``critic`` (both Q-networks), ``alpha`` (the log temperature, created
        here) and, with ``lagrangian``, ``lagrange`` (the log multiplier)."""
        module, config = self.module, self.config.hyperparameters
        self.log_alpha = torch.nn.Parameter(
            torch.tensor(math.log(config.initial_alpha), device=self.device))
        self.log_lagrange = torch.nn.Parameter(torch.zeros((), device=self.device))
        self.target_entropy = (-float(np.prod(module.action_space.shape))
                               if config.target_entropy is None else config.target_entropy)
        low, high = module.action_low, module.action_high
        self._uniform = torch.distributions.Uniform(low, high)
        self._uniform_logp = -torch.log(high - low).sum()
        optimizers = {"policy": OptimizerSpec(module.policy_parameters(), config.actor_lr),
                      "critic": OptimizerSpec(module.critic_parameters(), config.critic_lr),
                      "alpha": OptimizerSpec([self.log_alpha], config.alpha_lr)}
        if config.lagrangian:
            optimizers["lagrange"] = OptimizerSpec([self.log_lagrange], config.alpha_lr)
        return optimizers

    def compute_losses(self, *, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
                       ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The losses (see the class) and what to report of them."""
        module, config = self.module, self.config.hyperparameters
        obs, actions, next_obs = batch[Columns.OBS], batch[Columns.ACTIONS].float(), batch[
            Columns.NEXT_OBS]
        alpha = self.log_alpha.exp().detach()
        dist_inputs = fwd_out[Columns.ACTION_DIST_INPUTS]
        policy_actions, policy_logp = module.sample_actions(dist_inputs, 1 + config.num_actions)
        with torch.no_grad():
            next_dist_inputs = module.forward_train({Columns.OBS: next_obs})[
                Columns.ACTION_DIST_INPUTS]
            next_actions, next_logp = module.sample_actions(next_dist_inputs,
                                                            1 + config.num_actions)
            target = td_target(batch, self._next_value(next_obs, next_dist_inputs,
                                                       next_actions[:, 0],
                                                       alpha * next_logp[:, 0]), config.gamma)
        q_data = module.q_values(obs, actions, twin=config.twin_q)
        check_per_row("td_loss", len(obs), target=target,
                      **dict(zip(("q_value", "q_twin_value"), q_data)))
        td_loss = sum(torch.nn.functional.mse_loss(q, target) for q in q_data)
        candidates, candidate_logp = self._candidate_actions(
            policy_actions[:, 1:].detach(), policy_logp[:, 1:].detach(),
            next_actions[:, 1:], next_logp[:, 1:])
        repeated_obs = obs.repeat_interleave(candidates.shape[1], dim=0)
        candidate_q = module.q_values(repeated_obs, candidates.flatten(0, 1), twin=config.twin_q)
        penalties = torch.stack([
            conservative_penalty(q.view(len(obs), -1) - candidate_logp, q_taken,
                                 config.temperature)
            for q, q_taken in zip(candidate_q, q_data)])
        multiplier = (self.log_lagrange.exp().clamp(max=MAX_LAGRANGE_MULTIPLIER)
                      if config.lagrangian else torch.ones((), device=self.device))
        conservative = config.min_q_weight * (penalties - (config.lagrangian_thresh
                                                           if config.lagrangian else 0.0))
        critic_loss = td_loss + (multiplier.detach() * conservative).sum()
        sampled_action, sampled_logp = policy_actions[:, 0], policy_logp[:, 0]
        if self.num_updates < config.bc_iters:
            dist = module.get_train_action_dist_cls().from_logits(dist_inputs)
            policy_gain = dist.logp(actions)
        else:
            policy_gain = min_q(module.q_values(obs, sampled_action, twin=config.twin_q))
        check_per_row(POLICY_LOSS_KEY, len(obs), sampled_logp=sampled_logp,
                      policy_gain=policy_gain)
        policy_loss = (alpha * sampled_logp - policy_gain).mean()
        alpha_loss = -(self.log_alpha * (sampled_logp.detach() + self.target_entropy)).mean()
        losses = {"policy": policy_loss, "critic": critic_loss, "alpha": alpha_loss}
        stats = {POLICY_LOSS_KEY: policy_loss, "critic_loss": critic_loss, "td_loss": td_loss,
                 "cql_loss": penalties.mean(), "alpha_loss": alpha_loss, "alpha": alpha,
                 "mean_q": q_data[0].mean(), "entropy": -sampled_logp.mean().detach()}
        if config.lagrangian:
            losses["lagrange"] = -(multiplier * conservative.detach()).sum() / 2
            stats.update(lagrange_loss=losses["lagrange"], lagrange_multiplier=multiplier)
        return losses, stats

    def _next_value(self, next_obs: torch.Tensor, next_dist_inputs: torch.Tensor,
                    sampled_action: torch.Tensor, entropy_term: torch.Tensor) -> torch.Tensor:
        """The TD target's value of ``s'``: ``min_i Q_target_i(s', a')`` at the policy's mean
        action, or with ``soft_q_backup`` at a sampled one, less the entropy term."""
        module, config = self.module, self.config.hyperparameters
        if config.soft_q_backup:
            return min_q(module.q_values(next_obs, sampled_action, target=True,
                                         twin=config.twin_q)) - entropy_term
        mean_action = module.get_train_action_dist_cls().from_logits(
            next_dist_inputs).deterministic_sample()
        return min_q(module.q_values(next_obs, mean_action, target=True, twin=config.twin_q))

    def _candidate_actions(self, policy_actions: torch.Tensor, policy_logp: torch.Tensor,
                           next_actions: torch.Tensor, next_logp: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor]:
        """The conservative penalty's actions per row, ``(batch, 3 * num_actions, ...)``:
        uniform ones, the policy's at ``s``, the policy's at ``s'``; and their
        log-densities."""
        uniform = self._uniform.sample(policy_actions.shape[:2])
        uniform_logp = self._uniform_logp.expand(policy_logp.shape)
        return (torch.cat([uniform, policy_actions, next_actions], dim=1),
                torch.cat([uniform_logp, policy_logp, next_logp], dim=1))

    def after_gradient_based_update(self) -> None:
        """Moves the target Q-networks ``tau`` towards the Q-networks (every update, or as
        ``target_network_update_freq`` says)."""
        config = self.config.hyperparameters
        if config.updates_target_now(self.num_updates + 1,
                                     self.config.training.train_batch_size_per_learner):
            self.module.update_targets(config.tau)

    def training_state(self) -> dict[str, Any]:
        """The base state plus the log temperature and the log multiplier."""
        return {**super().training_state(), "log_alpha": self.log_alpha.detach(),
                "log_lagrange": self.log_lagrange.detach()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores what ``get_state`` returned."""
        super().set_state(state)
        with torch.no_grad():
            for name in ("log_alpha", "log_lagrange"):
                if name in state:
                    getattr(self, name).copy_(torch.as_tensor(state[name]))
