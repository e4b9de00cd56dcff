"""What the temporal-difference algorithms' configs share: the discount and n-step returns
(their target is ``td_target``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offline_rl.algorithms.config_checks import number_problems
from offline_rl.core.learner_config import LearnerConfig


@dataclass
class TDLearnerConfig(LearnerConfig):
    """``LearnerConfig`` plus the discount ``gamma`` and ``n_step``: with ``n_step > 1`` the
    PreLearners sample n-step transitions (rewards discounted over up to ``n_step`` steps,
    the observation ``n_step`` steps later) with an ``n_step`` column of the steps taken."""

    gamma: float = 0.99
    n_step: int = 1


def td_problems(config: Any) -> list[tuple[str, str]]:
    """``gamma`` in [0, 1]; ``n_step`` an int >= 1, above 1 only for inputs of whole episodes
    (tabular rows are single transitions, with nothing to look ahead to)."""
    problems = number_problems(config, {"gamma": ("in [0, 1]", lambda value: 0 <= value <= 1)})
    n_step = config.n_step
    if isinstance(n_step, bool) or not (isinstance(n_step, int) and n_step >= 1):
        problems.append(("n_step", f"must be an int >= 1, got {n_step!r}"))
    elif n_step > 1 and not (config.input_read_episodes or config.input_read_sample_batches):
        problems.append(("n_step", f"n_step={n_step} needs whole episodes: read them with "
                         "offline_data(input_read_episodes=True) (or SampleBatch JSON with "
                         "input_read_sample_batches=True); tabular rows are single transitions "
                         "(offline-rl convert turns them into episodes)"))
    return problems
