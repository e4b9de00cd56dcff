"""TD3+BC."""

from offline_rl.algorithms.td3bc.td3bc import TD3BC, TD3BCConfig

__all__ = ["TD3BC", "TD3BCConfig"]
