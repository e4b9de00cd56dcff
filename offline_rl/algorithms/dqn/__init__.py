"""Deep Q-networks from logged data."""

from offline_rl.algorithms.dqn.dqn import DQN, DQNConfig

__all__ = ["DQN", "DQNConfig"]
