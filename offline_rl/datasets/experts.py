"""Scripted behaviour policies with known quality, for reference datasets."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Gains of a linear controller on CartPole's (x, x_dot, theta, theta_dot): push right when the
#: weighted state is positive. Holds the pole for all 500 steps, also with 20% random actions.
CARTPOLE_GAINS = np.array([0.1, 0.5, 10.0, 2.0])


def cartpole_expert(obs: np.ndarray) -> int:
    """The CartPole-v1 expert's action for one observation."""
    return int(np.dot(CARTPOLE_GAINS, obs) > 0)


#: Expert policy per gymnasium env id, with the env's number of discrete actions.
EXPERTS: dict[str, tuple[Callable[[np.ndarray], int], int]] = {
    "CartPole-v1": (cartpole_expert, 2),
}


class EpsilonGreedy:
    """Takes the expert's action, or with probability ``epsilon`` a uniformly random one, and
    reports the behaviour policy's log-probabilities.

    Example:
        >>> import numpy as np
        >>> policy = EpsilonGreedy(cartpole_expert, num_actions=2, epsilon=0.0, seed=0)
        >>> policy(np.array([0.0, 0.0, 0.1, 0.0]))[0]
        1
    """

    def __init__(self, expert: Callable[[np.ndarray], int], num_actions: int, epsilon: float,
                 seed: int):
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.expert = expert
        self.num_actions = num_actions
        self.epsilon = epsilon
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray) -> tuple[int, np.ndarray]:
        """(action, log-probabilities of every action under the behaviour policy)."""
        greedy = self.expert(obs)
        probs = np.full(self.num_actions, self.epsilon / self.num_actions)
        probs[greedy] += 1.0 - self.epsilon
        explore = self.rng.random() < self.epsilon
        action = int(self.rng.integers(self.num_actions)) if explore else greedy
        with np.errstate(divide="ignore"):
            return action, np.log(probs).astype(np.float32)
