"""Behavior cloning."""

from offline_rl.algorithms.bc.bc import BC, BCConfig

__all__ = ["BC", "BCConfig"]
