"""The BC loss: negative log-likelihood of the logged actions under the policy."""

from __future__ import annotations

from offline_rl.columns import Columns
from offline_rl.core.learner import Learner
from offline_rl.core.loss_checks import check_per_row
from offline_rl.names import POLICY_LOSS_KEY


class BCTorchLearner(Learner):
    """Learner whose loss is ``-mean(log pi(a|s))`` over the batch's ``obs`` and ``actions``.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import BCConfig
        >>> config = BCConfig().training(lr=0.05).rl_module(model_config={"fcnet_hiddens": [8]})
        >>> spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (1,), np.float32),
        ...                                  gym.spaces.Discrete(2))
        >>> learner = BCTorchLearner(config.learner_config(spec))
        >>> batch = {"obs": np.array([[-1.0], [1.0]] * 8, np.float32),
        ...          "actions": np.array([0, 1] * 8)}
        >>> losses = [learner.update(batch)["policy_loss"] for _ in range(30)]
        >>> losses[-1] < 0.1 < losses[0]
        True
    """

    def compute_loss_for_module(self, *, module_id, batch, fwd_out):
        """Negative log-likelihood of ``batch["actions"]``."""
        dist_cls = self.module.get_train_action_dist_cls()
        dist = dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        logp = dist.logp(batch[Columns.ACTIONS])
        check_per_row(POLICY_LOSS_KEY, len(batch[Columns.ACTIONS]), logp=logp)
        policy_loss = -logp.mean()
        return policy_loss, {POLICY_LOSS_KEY: policy_loss}
