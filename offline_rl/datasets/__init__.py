"""Reference datasets recorded from scripted experts, deterministic by seed."""

from offline_rl.datasets.experts import EXPERTS, EpsilonGreedy
from offline_rl.datasets.generate import CARD_FILE, make_dataset

__all__ = ["CARD_FILE", "EXPERTS", "EpsilonGreedy", "make_dataset"]
