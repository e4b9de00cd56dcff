"""Implicit Q-learning."""

from offline_rl.algorithms.iql.iql import IQL, IQLConfig

__all__ = ["IQL", "IQLConfig"]
