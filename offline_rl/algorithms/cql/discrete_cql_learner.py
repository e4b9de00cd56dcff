"""Discrete CQL's loss: double Q-learning's TD error plus the conservative term."""

from __future__ import annotations

import torch

from offline_rl.algorithms.cql.conservative_penalty import conservative_penalty
from offline_rl.algorithms.td_target import td_target
from offline_rl.columns import Columns
from offline_rl.core.learner import Learner
from offline_rl.core.loss_checks import check_per_row
from offline_rl.core.optimizer_spec import DEFAULT_OPTIMIZER


class DiscreteCQLTorchLearner(Learner):
    """One optimizer on ``td_loss + min_q_weight * cql_loss``, where ``td_loss`` is the squared
    error of ``Q(s, a)`` against ``r + gamma * (1 - terminated) * Q_target(s', argmax Q(s', .))``
    (double Q-learning) and ``cql_loss`` is ``conservative_penalty``; the target network then
    moves ``tau`` towards the Q-network.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl.algorithms.cql import DiscreteCQLConfig
        >>> config = DiscreteCQLConfig().rl_module(model_config={"fcnet_hiddens": [8]})
        >>> spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (2,), np.float32),
        ...                                  gym.spaces.Discrete(3))
        >>> learner = DiscreteCQLTorchLearner(config.learner_config(spec))
        >>> batch = {"obs": np.zeros((4, 2), np.float32), "actions": np.array([0, 1, 2, 1]),
        ...          "rewards": np.ones(4, np.float32), "new_obs": np.zeros((4, 2), np.float32),
        ...          "terminateds": np.array([False, False, False, True])}
        >>> sorted(name for name in learner.update(batch) if name.endswith("_loss"))
        ['cql_loss', 'td_loss', 'total_loss']
    """

    def compute_losses(self, *, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
                       ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The one loss (see the class) and its two terms."""
        module, config = self.module, self.config.hyperparameters
        q_values = fwd_out[Columns.ACTION_DIST_INPUTS]
        actions = batch[Columns.ACTIONS].long()
        q_taken = q_values.gather(1, actions.reshape(-1, 1)).squeeze(1)
        with torch.no_grad():
            next_obs = batch[Columns.NEXT_OBS]
            next_actions = module.q_values(next_obs).argmax(dim=1, keepdim=True)
            next_q = module.q_values(next_obs, target=True).gather(1, next_actions).squeeze(1)
            target = td_target(batch, next_q, config.gamma)
        check_per_row("td_loss", len(actions), q_taken=q_taken, target=target)
        td_loss = torch.nn.functional.mse_loss(q_taken, target)
        cql_loss = conservative_penalty(q_values, q_taken)
        loss = td_loss + config.min_q_weight * cql_loss
        return {DEFAULT_OPTIMIZER: loss}, {"td_loss": td_loss, "cql_loss": cql_loss,
                                           "mean_q": q_taken.mean()}

    def after_gradient_based_update(self) -> None:
        """Moves the target network ``tau`` towards the Q-network."""
        self.module.update_targets(self.config.hyperparameters.tau)
