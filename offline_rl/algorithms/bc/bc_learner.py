"""The BC loss: negative log-likelihood of the logged actions under the policy."""

from __future__ import annotations

from offline_rl.columns import Columns
from offline_rl.core.learner import Learner


class BCTorchLearner(Learner):
    """Learner whose loss is ``-mean(log pi(a|s))`` over the batch's ``obs`` and ``actions``.

    Example:
        >>> learner = BCConfig().get_default_learner_class()(config, spec)  # doctest: +SKIP
    """

    def compute_loss_for_module(self, *, module_id, batch, fwd_out):
        """Negative log-likelihood of ``batch["actions"]``."""
        dist_cls = self.module.get_train_action_dist_cls()
        dist = dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        policy_loss = -dist.logp(batch[Columns.ACTIONS]).mean()
        return policy_loss, {"policy_loss": policy_loss}
