"""Conservative Q-learning."""

from offline_rl.algorithms.cql.discrete_cql import DiscreteCQL, DiscreteCQLConfig

__all__ = ["DiscreteCQL", "DiscreteCQLConfig"]
