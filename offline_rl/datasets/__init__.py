"""Reference datasets recorded from scripted behaviour policies, deterministic by seed."""

from offline_rl.datasets.experts import EXPECTED_RETURNS, EXPERTS, TIERS, behaviour_policy
from offline_rl.datasets.generate import CARD_FILE, make_dataset

__all__ = ["CARD_FILE", "EXPECTED_RETURNS", "EXPERTS", "TIERS", "behaviour_policy",
           "make_dataset"]
