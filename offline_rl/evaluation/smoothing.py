"""Evaluation returns smoothed over the last episodes played (RLlib's
``reporting(metrics_num_episodes_for_smoothing=N)``)."""

from __future__ import annotations

from collections.abc import Sequence

from offline_rl.statistics import episode_statistics

#: The figures averaged over the smoothing window; the counts stay the evaluation's own.
SMOOTHED = ("episode_return_mean", "episode_return_std", "episode_return_min",
            "episode_return_max", "episode_len_mean")


class SmoothedEpisodes:
    """Each evaluation's ``episode_statistics``, with the returns and lengths taken over the
    last ``window`` episodes played (earlier evaluations' included), or over all of this
    evaluation's when it played more; ``num_episodes`` and ``num_env_steps`` stay this
    evaluation's. ``window=None``: this evaluation's episodes only.

    Examples:
        >>> smoothed = SmoothedEpisodes(window=4)
        >>> smoothed.statistics([10.0, 20.0], [10, 20])["episode_return_mean"]
        15.0
        >>> second = smoothed.statistics([40.0, 50.0, 60.0], [40, 50, 60])
        >>> second["episode_return_mean"], second["num_episodes"]
        (42.5, 3)
    """

    def __init__(self, window: int | None):
        self.window = window
        self._recent: list[tuple[float, int]] = []

    def statistics(self, returns: Sequence[float], lengths: Sequence[int]
                   ) -> dict[str, int | float | None]:
        """This evaluation's statistics, smoothed (see the class)."""
        statistics = episode_statistics(returns, lengths)
        if self.window is None or not len(returns):
            return statistics
        self._recent += zip(returns, lengths, strict=True)
        recent = self._recent[-max(self.window, len(returns)):]
        self._recent = self._recent[-self.window:]
        smoothed = episode_statistics([r for r, _ in recent], [n for _, n in recent])
        return {**statistics, **{key: smoothed[key] for key in SMOOTHED}}
