"""``OfflinePreLearner``: the Ray Data actor that turns rows into train batches."""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import ray
from ray.data.block import BlockAccessor

from connectors import DEFAULT_LEARNER_PIECES, ConnectorPipelineV2, ConnectorV2
from offline_rl.columns import SCHEMA, Columns
from offline_rl.compression import decompress_column, looks_compressed
from offline_rl.data.data_config import DataConfig, as_data_config
from offline_rl.data.input_locator import RowLocator
from offline_rl.data.module_weights import WEIGHTS_VERSION, SyncedModule
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.replay_buffer import EpisodeBuffer, EpisodeReplayBuffer
from offline_rl.episodes.transitions import Transitions
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.formats.checks import (
    bound_actions,
    check_actions,
    check_column_types,
    check_recorded_spaces,
    nonfinite_error,
    nonfinite_rows,
    obs_bounds_error,
    observations_as_space_dtype,
    observations_outside,
    row_number,
)
from offline_rl.formats.episode_input import decode_episode, sample_batch_to_episodes
from offline_rl.formats.shapes import conform_columns
from offline_rl.formats.tabular import (
    conform_row_shapes,
    episode_ends,
    resolve_schema,
    rows_to_episodes,
    rows_to_train_columns,
    table_to_numpy,
    train_column_names,
)

#: Bookkeeping columns episodes are built with (agent and module ids are not: single-agent).
EPISODE_BOOKKEEPING = (Columns.EPS_ID, Columns.T, Columns.INFOS)
#: Column Ray Data adds with ``include_paths=True`` (episode formats read it for error messages).
PATH_COLUMN = "path"
#: Default PreLearner buffer capacity, in train batches.
BUFFER_CAPACITY_BATCHES = 10


class OfflinePreLearner:
    """Maps a batch of rows to a flat dict of numpy train columns.

    Ray Data runs one instance per actor of the ``map_batches`` pool. Tabular rows become
    single-step ``SingleAgentEpisode``s (``_map_to_episodes``), which the learner connector
    pipeline turns into columns; when neither is customized the same output is computed column
    by column. Episode formats (``input_read_episodes``, ``input_read_sample_batches``) are
    decoded into whole episodes, checked, added to the PreLearner's ``EpisodeReplayBuffer``, and
    sampled: about one train batch of exactly ``train_batch_size_per_learner`` timesteps per
    that many timesteps read. Subclasses override ``_map_to_episodes`` or ``__call__``
    (RLlib's extension points) and are named with ``offline_data(prelearner_class=...)``.

    Every format gets the same value checks (``offline_rl.formats.checks``). Data dropped
    (duplicate episodes, also across actors, empty ones, non-finite values with
    ``input_nonfinite="drop"``) and ``Box`` actions outside the space are counted into
    ``ledger`` (a ``DataLedger`` actor) and reported by ``Algorithm.train``.
    When a connector piece ``needs_module``, the PreLearner keeps a CPU copy of the module,
    refreshed from ``module_weights`` (a ``ModuleWeights`` actor), and tags each batch with the
    weights' version (column ``module_weights_version``).

    Example:
        >>> import gymnasium as gym, numpy as np, pyarrow as pa
        >>> from offline_rl import BCConfig
        >>> config = BCConfig().environment("CartPole-v1")
        >>> spaces = (gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2))
        >>> rows = pa.table({"obs": [[0.0, 0.1]], "new_obs": [[0.2, 0.3]], "actions": [1],
        ...                  "rewards": [1.0], "terminateds": [True]})
        >>> OfflinePreLearner(config, spaces)(rows)["new_obs"]
        array([[0.2, 0.3]], dtype=float32)
    """

    def __init__(self, config: DataConfig | Any, spaces: tuple[gym.Space, gym.Space], *,
                 ledger: Any = None, module_weights: Any = None, source: str | None = None,
                 **kwargs: Any):
        self.config = config = as_data_config(config, spaces)
        #: ``prelearner_kwargs``: passed on to ``_map_to_episodes``.
        self.kwargs = kwargs
        #: How error messages name the rows (default: "rows read from <input_>").
        self.source = source or f"rows read from {config.input_}"
        self.spaces = spaces
        self.observation_space, self.action_space = spaces
        self.schema = resolve_schema(config.input_read_schema)
        self.locator = RowLocator(config, self.schema, self.source)
        self.batch_size = config.train_batch_size_per_learner
        self.ledger = ledger
        if ledger is not None and ray.get_runtime_context().get_actor_id() is not None:
            self._register(ledger)
        self._learner_connector = config.build_learner_connector(*spaces)
        self._episode_stage, self._batch_stage = _split_stages(self._learner_connector)
        self.synced_module = None
        if self._learner_connector.needs_module:
            if module_weights is None:
                raise ConfigError("the learner connector needs the module, but the PreLearner "
                                  "was given no module_weights to fetch it from")
            self.synced_module = SyncedModule(config.rl_module_spec.build(), module_weights,
                                              config.prelearner_module_synch_period)
        #: A first piece with a column-by-column form (``on_single_steps``), and whether the
        #: episode stage is the default pieces after it, computed column by column instead.
        self._column_prefix, self._fast_columns = _column_path(self._episode_stage)
        self._custom_mapping = (inspect.getattr_static(type(self), "_map_to_episodes")
                                is not inspect.getattr_static(OfflinePreLearner,
                                                              "_map_to_episodes"))
        self._vectorized = self._fast_columns and not self._custom_mapping
        self._reads_episodes = config.reads_episodes
        self.episode_buffer = self._build_buffer() if self._reads_episodes else None
        self._extra_keys: tuple[str, ...] | None = None
        compressed = set(config.input_compress_columns)
        if Columns.OBS in compressed:
            compressed.add(Columns.NEXT_OBS)
        self._compressed = {self.schema.get(name, name) for name in compressed}

    @staticmethod
    def _register(ledger: Any) -> None:
        """Registers this actor with the pipeline's ledger, so ``OfflineData.stop()`` can kill
        it; when the ledger is gone, the pipeline was stopped while this actor was starting,
        and the actor exits (giving its resources back) instead of idling."""
        try:
            ray.get(ledger.register.remote(ray.get_runtime_context().current_actor))
        except ray.exceptions.RayActorError:
            ray.actor.exit_actor()

    def _build_buffer(self) -> EpisodeBuffer:
        config = self.config
        buffer_class = config.prelearner_buffer_class or EpisodeReplayBuffer
        kwargs = {"capacity": BUFFER_CAPACITY_BATCHES * self.batch_size, "seed": config.seed,
                  **config.prelearner_buffer_kwargs}
        self._vectorized_sampling = buffer_class is EpisodeReplayBuffer and self._fast_columns
        return buffer_class(**kwargs)

    def __call__(self, batch: pa.Table | Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Rows (an Arrow table or a dict of numpy columns) -> train columns."""
        if self._reads_episodes:
            return self._sample_episodes(*self._decode(batch))
        table = as_table(batch)
        if self._custom_mapping:
            episodes = self._map_to_episodes(
                False, self._all_columns(table), schema=self.schema, to_numpy=True,
                input_compress_columns=self.config.input_compress_columns,
                observation_space=self.observation_space, action_space=self.action_space,
                **self.kwargs)["episodes"]
            return self._check_transitions(self._connect(episodes), None)
        rows = self._read_rows(table)
        self._note_episodes(*episode_ends(table, rows, self.schema))
        if self._vectorized:
            columns = rows_to_train_columns(rows, self.schema, self.observation_space,
                                            self.source, action_space=self.action_space)
            return self._connect(columns=self._check_transitions(columns, table))
        episodes = self._map_to_episodes(
            False, rows, schema=self.schema, to_numpy=True,
            observation_space=self.observation_space, action_space=self.action_space,
        )["episodes"]
        return self._check_transitions(self._connect(episodes), table)

    def _connect(self, episodes: list[SingleAgentEpisode] | None = None,
                 columns: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """Runs the learner connector pipeline (with the synced module when it needs one):
        its episode stage on ``episodes`` (or ``columns`` the fast path computed in its
        place), then its batch stage on the flat batch."""
        module = None if self.synced_module is None else self.synced_module.get()
        shared_data: dict[str, Any] = {}
        if columns is None:
            columns = self._episode_stage(rl_module=module, batch={}, episodes=episodes,
                                          shared_data=shared_data, metrics={})
        elif self._column_prefix is not None:
            columns = self._column_prefix.on_single_steps(columns)
        columns = self._batch_stage(rl_module=module, batch=columns, episodes=[],
                                    shared_data=shared_data, metrics={})
        if module is not None:
            rows = len(np.asarray(columns[Columns.ACTIONS]))
            columns[WEIGHTS_VERSION] = np.full(rows, self.synced_module.version, np.int64)
        return columns

    def _all_columns(self, table: pa.Table) -> dict[str, np.ndarray]:
        """Every column as numpy, for a custom ``_map_to_episodes``."""
        try:
            return table_to_numpy(table)
        except DataFormatError as error:
            raise DataFormatError(f"{self.source}: {error}") from None

    # ------------------------------------------------------------------------------ tabular
    def _read_rows(self, table: pa.Table) -> dict[str, np.ndarray]:
        names = train_column_names(table.column_names, self.schema)
        if not self._vectorized:
            names += [self.schema[field] for field in EPISODE_BOOKKEEPING
                      if self.schema[field] in table.column_names]
        compressed = self._compressed | {
            self.schema[field] for field in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS)
            if self.schema[field] in table.column_names
            and looks_compressed(table.column(self.schema[field]))}
        try:
            rows = table_to_numpy(table, [name for name in names if name not in compressed])
        except DataFormatError as error:
            raise self.locator.null_error(table, names) or DataFormatError(
                f"{self.source}: {error}") from None
        for name in [name for name in names if name in compressed]:
            rows[name] = decompress_column(table.column(name).to_pylist(), name, self.source)
        return conform_row_shapes(rows, self.schema, self.spaces, self.source)

    def _check_transitions(self, columns: dict[str, Any],
                           table: pa.Table | None) -> dict[str, Any]:
        where = self.source
        # Observations are left to the connectors' shapes (frame stacking, say).
        columns.update(conform_columns({name: columns[name] for name in (Columns.ACTIONS,
                                                                          Columns.REWARDS)},
                                       self.spaces, where))
        values = {name: np.asarray(columns[name])
                  for name in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS)}
        check_column_types(values, where)
        rows = len(values[Columns.ACTIONS])
        place = (self.locator.place(table) if table is not None and table.num_rows == rows
                 else row_number)
        columns[Columns.ACTIONS] = self._bound_actions(values[Columns.ACTIONS], where, place)
        del values[Columns.ACTIONS]
        bad = nonfinite_rows(values)
        if bad.any() and self.config.input_nonfinite == "raise":
            raise nonfinite_error(values, bad, where, place)
        observations = {name: values[name] for name in (Columns.OBS, Columns.NEXT_OBS)}
        outside = observations_outside(observations, self.observation_space) & ~bad
        if outside.any() and self.config.input_obs_bounds == "raise":
            raise obs_bounds_error(observations, outside, self.observation_space, where, place)
        if not (bad.any() or outside.any()):
            return columns
        self._count({"nonfinite_rows": int(bad.sum()), "out_of_bounds_rows": int(outside.sum())})
        keep = ~(bad | outside)
        return {name: np.asarray(value)[keep] for name, value in columns.items()}

    def _bound_actions(self, actions: np.ndarray, where: str,
                       place: Callable[[int], str] = row_number) -> np.ndarray:
        """Checks the actions; applies ``input_action_bounds`` to ``Box`` actions outside the
        space and counts them. ``place(row)`` names a row for messages."""
        outside = check_actions(actions, self.action_space, where)
        if not outside.any():
            return actions
        self._count({"actions_out_of_bounds": int(outside.sum())})
        return bound_actions(actions, outside, self.action_space, self.config.input_action_bounds,
                             where, place)

    # ----------------------------------------------------------------------------- episodes
    def _decode(self, batch: pa.Table | Mapping[str, Any]
                ) -> tuple[list[SingleAgentEpisode], list[str]]:
        """The batch's episodes, and the file each was read from."""
        table = as_table(batch)
        paths = (table.column(PATH_COLUMN).to_pylist() if PATH_COLUMN in table.column_names
                 else [f"a row of {self.config.input_}"] * table.num_rows)
        if self.config.input_read_episodes:
            if "item" not in table.column_names:
                raise DataFormatError(
                    f"{paths[0] if paths else self.config.input_} has no column 'item' (columns: "
                    f"{table.column_names}); input_read_episodes=True reads episodes written with "
                    "output_write_episodes=True. For one row per timestep, unset "
                    "input_read_episodes")
            return ([decode_episode(item, f"{path} (column 'item')")
                     for item, path in zip(table.column("item").to_pylist(), paths)], paths)
        episodes, sources = [], []
        for row, path in zip(table.to_pylist(), paths):
            decoded = self._map_sample_batch_to_episodes(row, path)
            episodes += decoded
            sources += [path] * len(decoded)
        return episodes, sources

    @classmethod
    def _map_sample_batch_to_episodes(cls, row: dict[str, Any],
                                      where: str) -> list[SingleAgentEpisode]:
        """One legacy SampleBatch row -> its episodes (override to customize)."""
        return sample_batch_to_episodes(row, where)

    @staticmethod
    def _map_sample_batch_to_episode(is_multi_agent: bool, batch: Mapping[str, Any]
                                     ) -> dict[str, list[SingleAgentEpisode]]:
        """RLlib's conversion of a batch of legacy SampleBatch rows (``read_json`` ->
        ``iter_batches``, a dict of equal-length columns) into ``{"episodes": [...]}``, as the
        seed's conversion example calls it. Single-agent only."""
        if is_multi_agent:
            raise ConfigError("offline-rl reads single-agent SampleBatches only; multi-agent "
                              "recordings are not supported")
        names = list(batch)
        return {"episodes": [
            episode for index, values in enumerate(zip(*(batch[name] for name in names)))
            for episode in sample_batch_to_episodes(dict(zip(names, values)),
                                                    f"SampleBatch row {index} of the batch")]}

    def _admit(self, episodes: list[SingleAgentEpisode],
               sources: list[str]) -> list[SingleAgentEpisode]:
        """Checks each episode; drops (and counts) duplicates (within the batch, the buffer, or
        read from another file by any actor), empty and non-finite ones; notes unfinished
        ones (neither terminated nor truncated), which it keeps, and the ends of continued
        ones, so that the ledger counts the episodes that never end."""
        admitted, seen, drops = [], set(), Counter()
        elsewhere = self._claim(episodes, sources)
        for episode, source, duplicate in zip(episodes, sources, elsewhere):
            where = f"{source}: episode {episode.id_}"
            if duplicate or episode.id_ in seen or self._buffer_holds(episode.id_):
                drops["duplicate_episodes"] += 1
                continue
            seen.add(episode.id_)
            if not len(episode):
                drops["empty_episodes"] += 1
                continue
            dropped_for = self._check_episode(episode, where)
            if dropped_for:
                drops[dropped_for] += 1
                continue
            admitted.append(episode)
        self._count(drops)
        # An unfinished chunk (a recording stopped mid-episode) trains like any other: its
        # last transition is simply not terminal. It is counted, not dropped.
        self._note_episodes([episode.id_ for episode in admitted if not episode.is_done],
                            [episode.id_ for episode in admitted
                             if episode.is_done and episode.t_started > 0])
        return admitted

    def _buffer_holds(self, episode_id: str) -> bool:
        """Whether the buffer still holds the episode (buffers without ``__contains__``: no)."""
        return (hasattr(self.episode_buffer, "__contains__")
                and episode_id in self.episode_buffer)

    def _claim(self, episodes: list[SingleAgentEpisode], sources: list[str]) -> list[bool]:
        """Which episodes another file already holds, as the ledger has seen across actors."""
        if self.ledger is None or not episodes:
            return [False] * len(episodes)
        return ray.get(self.ledger.claim.remote([episode.id_ for episode in episodes], sources))

    def _check_episode(self, episode: SingleAgentEpisode, where: str) -> str | None:
        """Raises on values of the wrong type or outside the spaces (the same checks as for
        tabular rows); returns why the episode is to be dropped (non-finite values or
        observations outside the space, under a ``"drop"`` policy), else ``None``."""
        check_recorded_spaces((episode.observation_space, episode.action_space), self.spaces,
                              where)
        shaped = conform_columns({Columns.OBS: episode.observations.data,
                                  Columns.ACTIONS: episode.actions.data,
                                  Columns.REWARDS: episode.rewards.data}, self.spaces, where)
        observations = observations_as_space_dtype(shaped[Columns.OBS], self.observation_space,
                                                   where)
        episode.observations.data = observations
        rewards = episode.rewards.data = shaped[Columns.REWARDS]
        actions = shaped[Columns.ACTIONS]
        check_column_types({Columns.OBS: observations, Columns.ACTIONS: actions,
                            Columns.REWARDS: rewards}, where)
        episode.actions.data = self._bound_actions(actions, where)
        keys = tuple(sorted(episode.extra_model_outputs))
        if self._extra_keys is None:
            self._extra_keys = keys
        elif keys != self._extra_keys:
            raise DataFormatError(f"{where} has extra model outputs {list(keys)} but earlier "
                                  f"episodes have {list(self._extra_keys)}; all must match")
        for values in ({Columns.OBS: observations}, {Columns.REWARDS: rewards}):
            bad = nonfinite_rows(values)
            if bad.any():
                if self.config.input_nonfinite == "raise":
                    raise nonfinite_error(values, bad, where)
                return "nonfinite_episodes"
        outside = observations_outside({Columns.OBS: observations}, self.observation_space)
        if outside.any():
            if self.config.input_obs_bounds == "raise":
                raise obs_bounds_error({Columns.OBS: observations}, outside,
                                       self.observation_space, where)
            return "out_of_bounds_episodes"
        return None

    def _sample_episodes(self, episodes: list[SingleAgentEpisode],
                         sources: list[str]) -> dict[str, np.ndarray]:
        """Adds the episodes to the buffer and samples about one train batch per
        ``batch_size`` new timesteps (at least one per call). Episodes go in chunks of at most
        half the buffer's capacity, each sampled before the next, so no episode is evicted
        before it could be drawn."""
        batches, pending, chunk, chunk_steps = [], 0, [], 0
        limit = max(1, getattr(self.episode_buffer, "capacity", 0) // 2)
        for episode in [*self._admit(episodes, sources), None]:
            if chunk and (episode is None or chunk_steps + len(episode) > limit):
                self.episode_buffer.add(chunk)
                pending += chunk_steps
                batches += self._sample_batches(pending // self.batch_size)
                pending %= self.batch_size
                chunk, chunk_steps = [], 0
            if episode is not None:
                chunk.append(episode)
                chunk_steps += len(episode)
        if not batches or pending >= self.batch_size // 2:
            if not self.episode_buffer.get_num_timesteps():
                return {}
            batches += self._sample_batches(1)
        return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}

    def _sample_batches(self, count: int) -> list[dict[str, np.ndarray]]:
        if not count:
            return []
        buffer, n_step, gamma = self.episode_buffer, self.config.n_step, self.config.gamma
        if self._vectorized_sampling:
            transitions = Transitions(buffer.episodes)
            return [self._connect(columns=transitions.take(
                buffer.sample_timesteps(self.batch_size), n_step, gamma)) for _ in range(count)]
        # A custom buffer's ``sample`` need not know n_step unless it is used.
        n_step_kwargs = {"n_step": n_step, "gamma": gamma} if n_step > 1 else {}
        return [self._connect(buffer.sample(num_items=self.batch_size, **n_step_kwargs))
                for _ in range(count)]

    def _note_episodes(self, open_ids: list[str], ended_ids: list[str]) -> None:
        if (open_ids or ended_ids) and self.ledger is not None:
            ray.get(self.ledger.note_episodes.remote(open_ids, ended_ids))

    def _count(self, drops: Mapping[str, int]) -> None:
        drops = {name: count for name, count in drops.items() if count}
        if drops and self.ledger is not None:
            ray.get(self.ledger.add.remote(drops))

    @classmethod
    def _map_to_episodes(
        cls,
        is_multi_agent: bool,
        batch: Mapping[str, np.ndarray],
        schema: Mapping[str, str] = SCHEMA,
        to_numpy: bool = True,
        input_compress_columns: list[str] | None = None,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        **kwargs: Any,
    ) -> dict[str, list[SingleAgentEpisode]]:
        """Rows -> ``{"episodes": [...]}``, one single-step episode per row (RLlib's signature)."""
        if is_multi_agent:
            raise ConfigError("offline-rl reads single-agent data; got is_multi_agent=True")
        return {"episodes": rows_to_episodes(batch, schema, observation_space, action_space)}


def as_table(batch: pa.Table | Mapping[str, np.ndarray]) -> pa.Table:
    """A batch as an Arrow table (a dict of numpy columns is converted as Ray Data does)."""
    return batch if isinstance(batch, pa.Table) else BlockAccessor.batch_to_block(dict(batch))


def overrides_call(prelearner_class: type) -> bool:
    """Whether a PreLearner class has its own ``__call__``: it then gets its batches as dicts
    of numpy arrays, as in RLlib (``OfflinePreLearner`` itself reads Arrow tables)."""
    return prelearner_class.__call__ is not OfflinePreLearner.__call__


def map_in_process(prelearner: Any, table: pa.Table) -> dict[str, Any]:
    """``prelearner`` applied to ``table`` in this process, as the pipeline calls it: numpy
    columns for a class that overrides ``__call__`` (``batch_format="numpy"``), else Arrow."""
    numpy_rows = overrides_call(type(prelearner))
    return prelearner(BlockAccessor.for_block(table).to_numpy() if numpy_rows else table)


def _column_path(episode_stage: ConnectorPipelineV2) -> tuple[ConnectorV2 | None, bool]:
    """The episode stage's first piece when it has ``on_single_steps`` (else ``None``), and
    whether the pieces after it are the default pieces, so the stage can run column by
    column. Each default piece adds its own columns only where missing, so their order
    (before ``BatchIndividualItems``) and repeats do not change the batch."""
    pieces = list(episode_stage)
    prefix = pieces[0] if pieces and pieces[0].on_single_steps is not None else None
    kinds = [type(piece) for piece in pieces[prefix is not None:]]
    return prefix, (set(kinds) == set(DEFAULT_LEARNER_PIECES)
                    and kinds[-1] is DEFAULT_LEARNER_PIECES[-1]
                    and kinds.count(DEFAULT_LEARNER_PIECES[-1]) == 1)


def _split_stages(pipeline: ConnectorPipelineV2
                  ) -> tuple[ConnectorPipelineV2, ConnectorPipelineV2]:
    """The pipeline's episode stage (pieces that read episodes, ``needs_episodes``: the
    default pieces and such custom ones) and its batch stage (the others, which run after it
    on the flat train batch), each in pipeline order."""
    spaces = (pipeline.input_observation_space, pipeline.input_action_space)
    return (ConnectorPipelineV2(*spaces, connectors=[p for p in pipeline if p.needs_episodes]),
            ConnectorPipelineV2(*spaces,
                                connectors=[p for p in pipeline if not p.needs_episodes]))
