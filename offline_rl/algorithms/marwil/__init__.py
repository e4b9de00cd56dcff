"""Monotonic advantage re-weighted imitation learning."""

from offline_rl.algorithms.marwil.marwil import MARWIL, MARWILConfig

__all__ = ["MARWIL", "MARWILConfig"]
