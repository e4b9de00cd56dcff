"""DQN's loss: the TD error of ``Q(s, a)`` against a (double) Q-learning target, and the
periodic target-network update."""

from __future__ import annotations

import torch

from offline_rl.algorithms.td_target import td_target
from offline_rl.columns import Columns
from offline_rl.core.learner import Learner
from offline_rl.core.loss_checks import check_per_row
from offline_rl.core.optimizer_spec import DEFAULT_OPTIMIZER

#: ``td_error_loss_fn``'s choices: the mean of each over the batch's TD errors.
TD_ERROR_LOSSES = {"huber": torch.nn.functional.huber_loss,
                   "mse": torch.nn.functional.mse_loss}


def next_state_values(target_q: torch.Tensor, online_q: torch.Tensor | None = None
                      ) -> torch.Tensor:
    """The value of each next state: ``target_q`` at the action ``online_q`` rates best
    (double Q-learning), or without ``online_q`` the best of ``target_q``.

    Examples:
        >>> target_q, online_q = torch.tensor([[1.0, 5.0]]), torch.tensor([[3.0, 2.0]])
        >>> next_state_values(target_q, online_q), next_state_values(target_q)
        (tensor([1.]), tensor([5.]))
    """
    chooser = target_q if online_q is None else online_q
    return target_q.gather(1, chooser.argmax(dim=1, keepdim=True)).squeeze(1)


class DQNTorchLearner(Learner):
    """One optimizer on ``td_error_loss_fn(Q(s, a), target)``, where ``target`` is
    ``r + gamma ** n * (1 - terminated) * next_state_values(Q_target(s'), Q(s'))`` (without
    ``double_q``: ``max Q_target(s')``); the target network moves ``tau`` towards the Q-network
    each time the rows trained on pass a multiple of ``target_network_update_freq``.

    Example (a copy each time the rows trained on reach a multiple of 4):
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl.algorithms.dqn import DQNConfig
        >>> config = (DQNConfig().training(train_batch_size_per_learner=2,
        ...                                target_network_update_freq=4)
        ...           .rl_module(model_config={"fcnet_hiddens": [8]}))
        >>> learner = DQNTorchLearner(config.learner_config(config.get_rl_module_spec(
        ...     gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(3))))
        >>> batch = {"obs": np.ones((2, 2), np.float32), "actions": np.array([0, 2]),
        ...          "rewards": np.ones(2, np.float32), "new_obs": np.zeros((2, 2), np.float32),
        ...          "terminateds": np.array([False, True])}
        >>> module, copied = learner.module, []
        >>> for _ in range(4):
        ...     metrics = learner.update(batch)
        ...     copied.append(torch.equal(module.pi[0].weight, module.pi_target[0].weight))
        >>> copied, sorted(name for name in metrics if name.endswith("_loss"))
        ([False, True, False, True], ['td_loss', 'total_loss'])
    """

    def compute_losses(self, *, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
                       ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The TD loss (see the class), the mean Q of the actions taken and the mean absolute
        TD error."""
        module, config = self.module, self.config.hyperparameters
        actions = batch[Columns.ACTIONS].long()
        q_taken = fwd_out[Columns.ACTION_DIST_INPUTS].gather(1, actions.reshape(-1, 1)).squeeze(1)
        with torch.no_grad():
            next_obs = batch[Columns.NEXT_OBS]
            next_q = next_state_values(module.q_values(next_obs, target=True),
                                       module.q_values(next_obs) if config.double_q else None)
            target = td_target(batch, next_q, config.gamma)
        check_per_row("td_loss", len(actions), q_taken=q_taken, target=target)
        td_loss = TD_ERROR_LOSSES[config.td_error_loss_fn](q_taken, target)
        return {DEFAULT_OPTIMIZER: td_loss}, {
            "td_loss": td_loss, "mean_q": q_taken.mean(),
            "mean_td_error": (target - q_taken).abs().mean().detach()}

    def after_gradient_based_update(self) -> None:
        """Moves the target network ``tau`` towards the Q-network when this update's rows take
        the rows trained on past a multiple of ``target_network_update_freq``."""
        hyperparameters = self.config.hyperparameters
        before, after = self.rows_trained(self.num_updates), self.rows_trained(self.num_updates + 1)
        every = hyperparameters.target_network_update_freq
        if after // every > before // every:
            self.module.update_targets(hyperparameters.tau)
