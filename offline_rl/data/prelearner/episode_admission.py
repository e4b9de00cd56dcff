"""Episode inputs (``input_read_episodes``, ``input_read_sample_batches``): a batch of rows
decoded into episodes (``decode_episodes``), and the episodes admitted for training
(``EpisodeAdmission``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from offline_rl.columns import EPISODE_AGENTS, PATH_COLUMN
from offline_rl.data.prelearner.data_ledger import LedgerClient
from offline_rl.data.prelearner.value_policy import ValuePolicy
from offline_rl.data.source.data_config import DataConfig
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.replay_buffer import EpisodeBuffer
from offline_rl.errors import DataFormatError
from offline_rl.formats.checks import check_recorded_spaces
from offline_rl.formats.episode_input import (
    agent_names,
    decode_agent_episodes,
    decode_episode,
    module_sample_batch,
)


def decode_episodes(table: pa.Table, config: DataConfig,
                    map_sample_batch: Callable[[dict[str, Any], str], list[SingleAgentEpisode]]
                    ) -> tuple[list[SingleAgentEpisode], list[str]]:
    """The episodes of ``table`` and the file each was read from: one msgpack episode per row
    (column ``item``, ``input_read_episodes``; of a multi-agent config's module, the episodes
    of its agents, ``config.agent_ids``, in each multi-agent episode), or those
    ``map_sample_batch(row, where)`` makes of each legacy SampleBatch row.

    Examples:
        >>> import gymnasium as gym
        >>> from offline_rl import BCConfig
        >>> from offline_rl.codec import pack_episode_state
        >>> episode = SingleAgentEpisode("e1", observations=[[0.0], [1.0]], actions=[1],
        ...                              rewards=[1.0], terminated=True,
        ...                              len_lookback_buffer=0).to_numpy()
        >>> table = pa.table({"item": [pack_episode_state(episode.get_state())],
        ...                   "path": ["a.parquet"]})
        >>> config = BCConfig().offline_data(input_read_episodes=True).data_config(
        ...     (gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2)))
        >>> episodes, sources = decode_episodes(table, config, None)
        >>> [decoded.id_ for decoded in episodes], sources
        (['e1'], ['a.parquet'])
    """
    input_ = config.offline_data.input_
    paths = (table.column(PATH_COLUMN).to_pylist() if PATH_COLUMN in table.column_names
             else [f"a row of {input_}"] * table.num_rows)
    if config.offline_data.input_read_episodes:
        if "item" not in table.column_names:
            raise DataFormatError(
                f"{paths[0] if paths else input_} has no column 'item' (columns: "
                f"{table.column_names}); input_read_episodes=True reads episodes written with "
                "output_write_episodes=True. For one row per timestep, unset "
                "input_read_episodes")
        items = zip(table.column("item").to_pylist(), paths)
        if config.agent_ids is None:
            return [decode_episode(item, f"{path} (column 'item')") for item, path in items], paths
        listed = (table.column(EPISODE_AGENTS).to_pylist()
                  if EPISODE_AGENTS in table.column_names else [None] * table.num_rows)
        episodes, sources = [], []
        for (item, path), agents in zip(items, listed):
            decoded = decode_agent_episodes(item, f"{path} (column 'item')", config.agent_ids,
                                            agents)
            episodes += decoded
            sources += [path] * len(decoded)
        return episodes, sources
    episodes, sources = [], []
    for line, path in zip(table.to_pylist(), paths):
        row = module_sample_batch(line, config.module_id, path)
        if row is None:  # a MultiAgentBatch line without this module's rows
            continue
        decoded = map_sample_batch(row, path)
        episodes += decoded
        sources += [path] * len(decoded)
    return episodes, sources


class EpisodeAdmission:
    """Which decoded episodes a PreLearner trains on. Each is checked (its recorded spaces,
    its values with ``values``, its extra model outputs against earlier episodes'); dropped
    and counted into ``ledger`` are duplicates (within the batch, in ``buffer``, or read from
    another file by any actor: ``duplicate_episodes``), empty ones (``empty_episodes``) and
    those the value policies drop. Unfinished episodes (neither terminated nor truncated)
    are kept, and noted with the ends of continued ones, so that the ledger counts the
    episodes that never end.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import BCConfig
        >>> spaces = (gym.spaces.Box(-1, 1, (1,), np.float32), gym.spaces.Discrete(2))
        >>> values = ValuePolicy(BCConfig().data_config(spaces), spaces, LedgerClient(None))
        >>> admission = EpisodeAdmission(values, LedgerClient(None))
        >>> episode = SingleAgentEpisode("e1", observations=[[0.0], [1.0]], actions=[1],
        ...                              rewards=[1.0], terminated=True,
        ...                              len_lookback_buffer=0).to_numpy()
        >>> [kept.id_ for kept in admission.admit([episode, episode], ["a.parquet"] * 2)]
        ['e1']
    """

    def __init__(self, values: ValuePolicy, ledger: LedgerClient,
                 buffer: EpisodeBuffer | None = None) -> None:
        self.values = values
        self.ledger = ledger
        self.buffer = buffer
        #: The extra model outputs' keys every episode must have (the first checked one's).
        self._extra_keys: tuple[str, ...] | None = None

    def admit(self, episodes: list[SingleAgentEpisode],
              sources: list[str]) -> list[SingleAgentEpisode]:
        """The episodes to train on, of ``episodes`` read from ``sources`` (one each)."""
        admitted, seen, drops = [], set(), Counter()
        self._check_agent_ids(episodes, sources)
        elsewhere = self.ledger.claim([episode.id_ for episode in episodes], sources)
        for episode, source, duplicate in zip(episodes, sources, elsewhere):
            where = f"{source}: episode {episode.id_}" + (
                "" if episode.agent_id is None else f" (agent {episode.agent_id!r})")
            if duplicate or episode.id_ in seen or self._buffer_holds(episode.id_):
                drops["duplicate_episodes"] += 1
                continue
            seen.add(episode.id_)
            if not len(episode):
                drops["empty_episodes"] += 1
                continue
            dropped_for = self._check(episode, where)
            if dropped_for:
                drops[dropped_for] += 1
                continue
            admitted.append(episode)
        self.ledger.count(drops)
        # An unfinished chunk (a recording stopped mid-episode) trains like any other: its
        # last transition is simply not terminal. It is counted, not dropped.
        self.ledger.note_episodes([episode.id_ for episode in admitted if not episode.is_done],
                                  [episode.id_ for episode in admitted
                                   if episode.is_done and episode.t_started > 0])
        return admitted

    def _check_agent_ids(self, episodes: list[SingleAgentEpisode], sources: list[str]) -> None:
        """Raises ``DataFormatError`` naming both when two agents' ids read as one (``0`` and
        ``'0'``), in this batch or as ids any actor read before (the ledger's): their episodes
        may be in different files, and the ``agent_ids`` column of each only names them."""
        batch: dict[str, tuple[Any, str]] = {}
        for episode, source in zip(episodes, sources):
            if episode.agent_id is not None:
                agent_names([episode.agent_id],
                            f"{source}: episode {episode.multi_agent_episode_id}", batch)
        for text, first in self.ledger.first_agents(batch).items():
            agent, where = batch[text]
            agent_names([agent], where, {text: first})

    def _buffer_holds(self, episode_id: str) -> bool:
        """Whether the buffer still holds the episode (buffers without ``__contains__``: no)."""
        return hasattr(self.buffer, "__contains__") and episode_id in self.buffer

    def _check(self, episode: SingleAgentEpisode, where: str) -> str | None:
        """Raises on an episode recorded in other spaces, with values of the wrong type or
        outside the spaces, or with other extra model outputs than earlier episodes; returns
        why the value policies drop it, else ``None``."""
        check_recorded_spaces((episode.observation_space, episode.action_space),
                              self.values.spaces, where)
        self.values.conform_episode(episode, where)
        keys = tuple(sorted(episode.extra_model_outputs))
        if self._extra_keys is None:
            self._extra_keys = keys
        elif keys != self._extra_keys:
            raise DataFormatError(f"{where} has extra model outputs {list(keys)} but earlier "
                                  f"episodes have {list(self._extra_keys)}; all must match")
        return self.values.episode_drop_reason(episode, where)
