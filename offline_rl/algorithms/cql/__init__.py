"""Conservative Q-learning: continuous (SAC-based) and discrete."""

from offline_rl.algorithms.cql.cql import CQL, CQLConfig
from offline_rl.algorithms.cql.discrete_cql import DiscreteCQL, DiscreteCQLConfig

__all__ = ["CQL", "CQLConfig", "DiscreteCQL", "DiscreteCQLConfig"]
