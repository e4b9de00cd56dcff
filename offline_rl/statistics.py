"""Statistics of episode returns and lengths, under RLlib's metric names."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def episode_statistics(returns: Sequence[float], lengths: Sequence[int]
                       ) -> dict[str, int | float | None]:
    """``num_episodes``, ``num_env_steps``, ``episode_return_mean``/``_std``/``_min``/``_max``
    and ``episode_len_mean`` of episodes with these ``returns`` and ``lengths`` (one of each per
    episode). With no episodes the counts are 0 and the other values ``None``.

    Examples:
        >>> statistics = episode_statistics([10.0, 20.0], [10, 30])
        >>> statistics["num_env_steps"], statistics["episode_return_std"]
        (40, 5.0)
        >>> episode_statistics([], [])["episode_return_mean"] is None
        True
    """
    if len(returns) != len(lengths):
        raise ValueError(f"{len(returns)} returns but {len(lengths)} lengths: give one of each "
                         "per episode")
    returns = np.asarray(returns, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.int64)
    none = not len(returns)
    return {
        "num_episodes": len(returns),
        "num_env_steps": int(lengths.sum()),
        "episode_return_mean": None if none else float(returns.mean()),
        "episode_return_std": None if none else float(returns.std()),
        "episode_return_min": None if none else float(returns.min()),
        "episode_return_max": None if none else float(returns.max()),
        "episode_len_mean": None if none else float(lengths.mean()),
    }
