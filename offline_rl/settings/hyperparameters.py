"""An algorithm's own hyperparameters: one dataclass per algorithm, used by its builder
(``training``'s extra keywords), its learner (``config.hyperparameters``) and its checks."""

from __future__ import annotations

from dataclasses import dataclass

from offline_rl.settings.options import Section


@dataclass
class Hyperparameters(Section):
    """The base: no hyperparameters (behavior cloning's case); algorithms subclass it.

    Examples:
        >>> Hyperparameters().n_step_returns()
        (1, 1.0)
    """

    def n_step_returns(self) -> tuple[int, float]:
        """``(n_step, gamma)``: the steps each sampled transition spans and the discount of
        the rewards summed over them (temporal-difference algorithms' ``n_step``; one step,
        undiscounted, for the others)."""
        return 1, 1.0
