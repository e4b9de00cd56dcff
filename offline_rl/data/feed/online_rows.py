"""The online share of train batches: a learner's replay buffer of the episodes the sampler's
env runners played, and how many of each batch's rows it supplies.

``input_={path: 1 - w, "sampler": w}`` trains on batches of which ``w`` comes from the
environment. The data pipeline reads the offline source (``DataConfig.sampler_weight``); each
learner keeps an ``OnlineRows``: the episodes the driver hands it every ``train()`` go into
its ``EpisodeReplayBuffer``, and each train batch of ``B`` rows takes
``round((n + 1) w B) - round(n w B)`` rows from it (batch ``n``, counted from 0; so ``n``
batches hold exactly ``round(n w B)`` online rows, and each batch ``round(w B)`` give or take
one), the rest from the offline stream. Online rows go through the same learner connector
pipeline as offline ones (``LearnerStages`` and ``EpisodeSampler``, as in the PreLearners).

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> from offline_rl import BCConfig, SingleAgentEpisode
    >>> spaces = (gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2))
    >>> config = (BCConfig().training(train_batch_size_per_learner=10)
    ...           .offline_data(input_={"data/expert": 0.7, "sampler": 0.3})
    ...           .data_config(spaces))
    >>> config.offline_data.input_, config.sampler_weight
    ('data/expert', 0.3)
    >>> online = OnlineRows(config, seed=0)
    >>> online.add([SingleAgentEpisode(observations=[[0.0]] * 5, actions=[1] * 4,
    ...                                rewards=[1.0] * 4, terminated=True,
    ...                                len_lookback_buffer=0).get_state()])
    >>> offline = {"obs": np.zeros((7, 1), np.float32), "actions": np.zeros(7, np.int64)}
    >>> batch = online.mixed_into(offline, online.num_rows(10))
    >>> batch["actions"].tolist(), online.rows_taken
    ([0, 0, 0, 0, 0, 0, 0, 1, 1, 1], 3)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from offline_rl.columns import Columns
from offline_rl.data.prelearner.episode_sampling import EpisodeSampler
from offline_rl.data.prelearner.learner_stages import LearnerStages
from offline_rl.data.prelearner.module_weights import WEIGHTS_VERSION
from offline_rl.data.prelearner.prelearner import overrides_call
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.replay_buffer import EpisodeReplayBuffer
from offline_rl.errors import ConfigError, DataFormatError

#: Timesteps each learner's online replay buffer holds (oldest episodes evicted first).
ONLINE_BUFFER_CAPACITY = 100_000


def check_online_rows_can_be_built(needs_module: bool, prelearner_class: type) -> None:
    """Refuses, before any Ray work, what online rows cannot go through: they are episodes the
    sampler played, which each learner maps with the learner connector pipeline alone
    (``OnlineRows``), without the module (``needs_module``) and without a PreLearner (a
    ``prelearner_class`` with its own ``__call__``)."""
    if needs_module:
        raise ConfigError(
            "input_ mixes in 'sampler', but the learner connector needs the module (e.g. "
            "MARWIL's advantages): online rows are built without one; train such algorithms on "
            "offline data only")
    if overrides_call(prelearner_class):
        raise ConfigError(
            f"input_ mixes in 'sampler', but prelearner_class {prelearner_class.__qualname__} "
            "has its own __call__, which online rows would bypass: only the learner connector "
            "pipeline maps them. Move the transform into a learner connector piece "
            "(config.training(learner_connector=...)), which offline and online rows both go "
            "through, or train on offline data only")


class OnlineRows:
    """One learner's online rows: a replay buffer of the sampler's episodes and the
    connector pipeline of ``config`` (a ``DataConfig``, whose ``sampler_weight`` is the share
    of each batch), seeded with ``seed``."""

    def __init__(self, config: Any, *, seed: int | None = None):
        pipeline = config.build_learner_connector(*_spaces(config))
        self.weight = config.sampler_weight
        self.sampler = EpisodeSampler(
            config, LearnerStages(pipeline),
            buffer=EpisodeReplayBuffer(ONLINE_BUFFER_CAPACITY, seed=seed))
        #: Train batches mixed so far, and the online rows they took.
        self.batches = 0
        self.rows_taken = 0

    def add(self, episode_states: Iterable[dict[str, Any]]) -> None:
        """Adds episodes (``SingleAgentEpisode.get_state()`` dicts) to the buffer."""
        self.sampler.buffer.add([SingleAgentEpisode.from_state(state).to_numpy()
                                 for state in episode_states])

    def num_rows(self, batch_size: int) -> int:
        """How many of the next batch's ``batch_size`` rows are online (0 while the buffer is
        empty)."""
        if not self.sampler.buffer.get_num_timesteps():
            return 0
        share = self.weight * batch_size
        return round((self.batches + 1) * share) - round(self.batches * share)

    def mixed_into(self, batch: dict[str, Any], num_rows: int,
                   weights_version: int = 0) -> dict[str, Any]:
        """``batch`` (offline train columns) followed by ``num_rows`` online rows, in
        ``batch``'s columns (a ``module_weights_version`` column gets ``weights_version`` for
        online rows, an ``action_prob`` column their ``exp(action_logp)``; online columns the
        offline rows lack, such as ``action_logp`` beside data without it, are left out).
        ``DataFormatError`` when online rows lack one of ``batch``'s columns."""
        self.batches += 1
        if not num_rows:
            return batch
        online = self.sampler.draw(num_rows)
        online[WEIGHTS_VERSION] = np.full(num_rows, weights_version, np.int64)
        if Columns.ACTION_PROB in batch and Columns.ACTION_LOGP in online:  # as RLlib records
            online.setdefault(Columns.ACTION_PROB, np.exp(online[Columns.ACTION_LOGP]))
        missing = sorted(set(batch) - set(online))
        if missing:
            raise DataFormatError(
                f"the offline train batches hold columns {missing} that the sampler's rows "
                f"lack (they hold {sorted(online)}): the loss would see them for some rows "
                "only; drop them from the offline data (input_read_method_kwargs={'columns': "
                "[...]}) or train without 'sampler'")
        self.rows_taken += num_rows
        return {name: np.concatenate([np.asarray(values),
                                      np.asarray(online[name]).astype(np.asarray(values).dtype)])
                for name, values in batch.items()}


def _spaces(config: Any) -> tuple[Any, Any]:
    spec = config.rl_module_spec
    return (None, None) if spec is None else (spec.observation_space, spec.action_space)
