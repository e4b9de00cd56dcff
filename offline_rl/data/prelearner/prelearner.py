"""``OfflinePreLearner``: the Ray Data actor that turns rows into train batches."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
from ray.data.block import BlockAccessor

from offline_rl.columns import Columns
from offline_rl.data.prelearner.call_output import mapper_for, train_columns
from offline_rl.data.prelearner.data_ledger import LedgerBook, LedgerClient
from offline_rl.data.prelearner.episode_admission import (
    EpisodeAdmission,
    decode_episodes,
)
from offline_rl.data.prelearner.episode_sampling import EpisodeSampler
from offline_rl.data.prelearner.learner_stages import LearnerStages
from offline_rl.data.prelearner.map_functions import map_function, takes_batch_first
from offline_rl.data.prelearner.module_weights import LoadedModule, SyncedModule
from offline_rl.data.prelearner.tabular_rows import EPISODE_BOOKKEEPING, RowReader
from offline_rl.data.prelearner.value_policy import ValuePolicy
from offline_rl.data.source.data_config import DataConfig, as_data_config, input_spaces
from offline_rl.data.source.input_locator import RowLocator
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError
from offline_rl.formats.checks import row_number
from offline_rl.formats.episode_input import sample_batch_to_episodes
from offline_rl.formats.tabular import resolve_schema, rows_to_episodes, rows_to_train_columns
from offline_rl.names import DEFAULT_MODULE_ID
from offline_rl.nested_keys import DELIMITER

#: Rows per PreLearner call, in train batches, unless ``input_read_batch_size`` is set.
ROWS_PER_PRELEARNER_CALL = 32
#: Rows (episodes or SampleBatches) per PreLearner call for the episode formats.
EPISODES_PER_PRELEARNER_CALL = 32


class OfflinePreLearner:
    """Maps a batch of rows to a flat dict of numpy train columns.

    Ray Data runs one instance per actor of the ``map_batches`` pool. Tabular rows become
    single-step ``SingleAgentEpisode``s (``_map_to_episodes``), which the learner connector
    pipeline turns into columns; when neither is customized the same output is computed column
    by column. Episode formats (``input_read_episodes``, ``input_read_sample_batches``) are
    decoded into whole episodes, checked, added to the PreLearner's ``EpisodeReplayBuffer``, and
    sampled: about one train batch of exactly ``train_batch_size_per_learner`` timesteps per
    that many timesteps read. Subclasses override ``_map_to_episodes`` or ``__call__``
    (RLlib's extension points) and are named with ``offline_data(prelearner_class=...)``; an
    own ``__call__`` gets numpy columns and may return train columns or, as RLlib's, ``{"batch":
    MultiAgentBatch}`` (``offline_rl.data.prelearner.call_output``).

    Every format gets the same value checks (``offline_rl.formats.checks``). Data dropped
    (duplicate episodes, also across actors, empty ones, non-finite values with
    ``input_nonfinite="drop"``) and ``Box`` actions outside the space are counted into
    ``ledger`` (the pipeline's ``LedgerBook``) and reported by ``Algorithm.train``.
    When a connector piece ``needs_module``, the PreLearner keeps a CPU copy of the module,
    refreshed from ``module_weights`` (a ``ModuleWeights`` actor), and tags each batch with the
    weights' version (column ``module_weights_version``).

    The PreLearner picks the path batches take once, when it is built, and leaves the work to
    its parts: ``rows`` (a ``RowReader``) reads tabular rows, ``admission`` (an
    ``EpisodeAdmission``) the episodes of episode formats, ``values`` (a ``ValuePolicy``)
    checks the values of both, ``sampler`` (an ``EpisodeSampler``) holds the episode buffer,
    and ``stages`` (``LearnerStages``) runs the learner connector pipeline.

    Examples:
        >>> import gymnasium as gym, numpy as np, pyarrow as pa
        >>> from offline_rl import BCConfig
        >>> config = BCConfig().environment("CartPole-v1")
        >>> spaces = (gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2))
        >>> rows = pa.table({"obs": [[0.0, 0.1]], "new_obs": [[0.2, 0.3]], "actions": [1],
        ...                  "rewards": [1.0], "terminateds": [True]})
        >>> OfflinePreLearner(config, spaces)(rows)["default_policy/new_obs"]
        array([[0.2, 0.3]], dtype=float32)
    """

    def __init__(self, config: DataConfig | Any,
                 spaces: tuple[gym.Space, gym.Space] | None = None, *,
                 ledger: LedgerBook | None = None, module_weights: Any = None,
                 source: str | None = None, module_spec: Any = None, module_state: Any = None,
                 **kwargs: Any):
        spaces = _module_spaces(module_spec) if spaces is None else spaces
        spaces = input_spaces(config, spaces)
        self.config = config = as_data_config(config, spaces)
        #: ``prelearner_kwargs``: passed on to ``_map_to_episodes``.
        self.kwargs = kwargs
        #: RLlib's arguments (a ``MultiRLModuleSpec`` of the learners' module, and its
        #: state), given to every PreLearner for subclasses that build their own module;
        #: this class builds one, from ``config.rl_module_spec``, only for pieces that need it.
        self.module_spec, self.module_state = module_spec, module_state
        #: How error messages name the rows (default: "rows read from <input_>").
        self.source = source or f"rows read from {config.offline_data.input_}"
        self.spaces = spaces
        self.observation_space, self.action_space = spaces
        self.schema = resolve_schema(config.offline_data.input_read_schema)
        self.locator = RowLocator(config, self.schema, self.source)
        #: What this PreLearner counts and notes into ``ledger`` (a ``LedgerBook``).
        self.reports = LedgerClient(ledger)
        self.reports.register()
        self._learner_connector = config.build_learner_connector(*spaces)
        self.stages = LearnerStages(self._learner_connector, self._synced_module(module_weights))
        self.values = ValuePolicy(config, spaces, self.reports)
        self.rows = RowReader(config, self.schema, spaces, self.locator, self.reports)
        self.sampler = EpisodeSampler(config, self.stages) if config.reads_episodes else None
        self.episode_buffer = None if self.sampler is None else self.sampler.buffer
        self.admission = EpisodeAdmission(self.values, self.reports, self.episode_buffer)
        #: How every batch is mapped (``_choose_path``).
        self._map_batch = self._choose_path()

    def _synced_module(self, module_weights: Any) -> SyncedModule | LoadedModule | None:
        """A CPU copy of the module, kept in sync with ``module_weights`` (or, without them,
        holding RLlib's ``module_state``), when the learner connector needs the module; else
        ``None``."""
        if not self._learner_connector.needs_module:
            return None
        if module_weights is None and self.module_state is not None:
            return LoadedModule(self.config.rl_module_spec.build(), self.module_state)
        if module_weights is None:
            raise ConfigError("the learner connector needs the module, but the PreLearner "
                              "was given neither module_weights to fetch it from nor "
                              "module_state (the learner's get_state(component="
                              "COMPONENT_RL_MODULE)['rl_module'])")
        return SyncedModule(self.config.rl_module_spec.build(), module_weights,
                            self.config.offline_data.prelearner_module_synch_period)

    def _choose_path(self) -> Callable[[pa.Table], dict[str, Any]]:
        """How every batch is mapped, decided once: episode inputs through the episode
        buffer; tabular rows through a custom ``_map_to_episodes``, else column by column
        when the connector's episode stage allows it, else as single-step episodes."""
        if self.config.reads_episodes:
            return self._sample_episodes
        if (inspect.getattr_static(type(self), "_map_to_episodes")
                is not inspect.getattr_static(OfflinePreLearner, "_map_to_episodes")):
            return self._map_custom_episodes
        if self.stages.columnar:
            return self._map_columns
        return self._map_single_steps

    def __call__(self, batch: pa.Table | Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Rows (an Arrow table or a dict of numpy columns) -> the module's train columns, as
        RLlib's PreLearner returns them: keyed ``"<module id>/<column>"`` (``flatten_dict`` of
        ``{module_id: columns}``; ``unflatten_dict`` nests them again)."""
        module = self.config.module_id or DEFAULT_MODULE_ID
        return {f"{module}{DELIMITER}{name}": values
                for name, values in self._map_batch(as_table(batch)).items()}

    def admitted_episodes(self, batch: pa.Table | Mapping[str, Any]
                          ) -> list[SingleAgentEpisode]:
        """The episodes of a batch of episode input (``reads_episodes``), decoded and admitted
        as for training: checked, without duplicates, empty ones or those the value policies
        drop (counted)."""
        return self.admission.admit(*decode_episodes(as_table(batch), self.config,
                                                     self._map_sample_batch_to_episodes))

    def _sample_episodes(self, table: pa.Table) -> dict[str, np.ndarray]:
        """Episode inputs: admitted to the buffer, and train batches sampled from it."""
        return self.sampler.sample(self.admitted_episodes(table))

    def _map_custom_episodes(self, table: pa.Table) -> dict[str, Any]:
        """Tabular rows, every column, through the subclass's ``_map_to_episodes``: RLlib's
        static form (``is_multi_agent, batch, schema, ...``) or its method (``batch, to_numpy,
        **kwargs``, reading ``self.config``)."""
        rows = self.rows.read_all(table)
        if takes_batch_first(type(self)):
            episodes = self._map_to_episodes(rows, to_numpy=True, **self.kwargs)["episodes"]
        else:
            episodes = self._map_to_episodes(
                False, rows, schema=self.schema, to_numpy=True,
                input_compress_columns=self.config.offline_data.input_compress_columns,
                observation_space=self.observation_space, action_space=self.action_space,
                **self.kwargs)["episodes"]
        return self._checked(self.stages.from_episodes(episodes))

    def _map_columns(self, table: pa.Table) -> dict[str, Any]:
        """Tabular rows, column by column (the default pieces' output, computed directly)."""
        rows = self.rows.read(table)
        columns = rows_to_train_columns(rows, self.schema, self.observation_space,
                                        self.source, action_space=self.action_space)
        return self.stages.from_columns(self._checked(columns, table))

    def _map_single_steps(self, table: pa.Table) -> dict[str, Any]:
        """Tabular rows as single-step episodes, through the connector's episode stage."""
        rows = self.rows.read(table, EPISODE_BOOKKEEPING)
        episodes = self._map_to_episodes(
            False, rows, schema=self.schema, to_numpy=True,
            observation_space=self.observation_space, action_space=self.action_space,
        )["episodes"]
        return self._checked(self.stages.from_episodes(episodes), table)

    def _checked(self, columns: dict[str, Any], table: pa.Table | None = None
                 ) -> dict[str, Any]:
        """``columns`` after the value checks, their rows named as ``table``'s when it has as
        many (a custom mapping's by their number)."""
        rows = len(np.asarray(columns[Columns.ACTIONS]))
        place = (self.locator.place(table) if table is not None and table.num_rows == rows
                 else row_number)
        return self.values.transitions(columns, self.source, place)

    @classmethod
    def _map_sample_batch_to_episodes(cls, row: dict[str, Any],
                                      where: str) -> list[SingleAgentEpisode]:
        """One legacy SampleBatch row -> its episodes (override to customize)."""
        return sample_batch_to_episodes(row, where)

    @map_function
    def _map_sample_batch_to_episode(self_or_class: Any, is_multi_agent: bool,
                                     batch: Mapping[str, Any], **kwargs: Any
                                     ) -> dict[str, list[SingleAgentEpisode]]:
        """RLlib's conversion of a batch of legacy SampleBatch rows (``read_json`` ->
        ``take_batch``, a dict of equal-length columns) into ``{"episodes": [...]}``, in both of
        RLlib's forms: ``OfflinePreLearner._map_sample_batch_to_episode(False, batch)`` and a
        PreLearner's ``_map_sample_batch_to_episode(batch)``. Single-agent only."""
        if is_multi_agent:
            raise ConfigError("offline-rl reads single-agent SampleBatches only; multi-agent "
                              "recordings are not supported")
        names = list(batch)
        return {"episodes": [
            episode for index, values in enumerate(zip(*(batch[name] for name in names)))
            for episode in sample_batch_to_episodes(dict(zip(names, values)),
                                                    f"SampleBatch row {index} of the batch")]}

    @map_function
    def _map_to_episodes(
        self_or_class: Any,
        is_multi_agent: bool,
        batch: Mapping[str, np.ndarray],
        schema: Mapping[str, str] | None = None,
        to_numpy: bool = True,
        input_compress_columns: list[str] | None = None,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        **kwargs: Any,
    ) -> dict[str, list[SingleAgentEpisode]]:
        """Rows -> ``{"episodes": [...]}``, one single-step episode per row, in both of RLlib's
        forms: ``OfflinePreLearner._map_to_episodes(False, batch, schema=...)`` and a
        PreLearner's ``_map_to_episodes(batch)``, which reads its config (``input_read_schema``,
        ``ignore_final_observation``) and spaces."""
        if is_multi_agent:
            raise ConfigError("offline-rl reads single-agent data; got is_multi_agent=True")
        if isinstance(self_or_class, OfflinePreLearner):
            schema = schema or self_or_class.schema
            observation_space = observation_space or self_or_class.observation_space
            action_space = action_space or self_or_class.action_space
            if self_or_class.config.offline_data.ignore_final_observation:
                obs = np.asarray(batch[schema[Columns.OBS]])
                batch = {**batch, schema[Columns.NEXT_OBS]: np.zeros_like(obs)}
        return {"episodes": rows_to_episodes(batch, resolve_schema(schema or {}),
                                             observation_space, action_space)}


def _module_spaces(module_spec: Any) -> tuple[gym.Space, gym.Space] | None:
    """The default module's spaces in RLlib's ``module_spec`` argument (a
    ``MultiRLModuleSpec``), when it gives both; else ``None``."""
    specs = getattr(module_spec, "rl_module_specs", None)
    spec = specs.get(DEFAULT_MODULE_ID) if isinstance(specs, Mapping) else module_spec
    spaces = (getattr(spec, "observation_space", None), getattr(spec, "action_space", None))
    return None if None in spaces else spaces


def as_table(batch: pa.Table | Mapping[str, np.ndarray]) -> pa.Table:
    """A batch as an Arrow table (a dict of numpy columns is converted as Ray Data does)."""
    return batch if isinstance(batch, pa.Table) else BlockAccessor.batch_to_block(dict(batch))


def overrides_call(prelearner_class: type) -> bool:
    """Whether a PreLearner class has its own ``__call__``: it then gets its batches as dicts
    of numpy arrays, as in RLlib (``OfflinePreLearner`` itself reads Arrow tables)."""
    return prelearner_class.__call__ is not OfflinePreLearner.__call__


def map_batches_callable(prelearner_class: type) -> tuple[type, str]:
    """What Ray Data's ``map_batches`` maps with for ``prelearner_class`` (``mapper_for``:
    its outputs as ``train_columns`` in an Arrow table), and its ``batch_format``: a class with
    its own ``__call__`` gets numpy columns; ``OfflinePreLearner``'s reads Arrow."""
    return mapper_for(prelearner_class), "numpy" if overrides_call(prelearner_class) else "pyarrow"


def map_in_process(prelearner: Any, table: pa.Table) -> Mapping[str, Any]:
    """``prelearner`` applied to ``table`` in this process, as the pipeline calls it: numpy
    columns for a class that overrides ``__call__`` (``batch_format="numpy"``), its output as
    ``train_columns``; else Arrow."""
    if not overrides_call(type(prelearner)):
        return train_columns(prelearner(table))
    return train_columns(prelearner(BlockAccessor.for_block(table).to_numpy()))


def rows_per_call(config: DataConfig) -> int:
    """Rows of input per PreLearner call (Ray Data's ``map_batches`` batch size):
    ``input_read_batch_size``, else ``EPISODES_PER_PRELEARNER_CALL`` episodes or
    ``ROWS_PER_PRELEARNER_CALL`` train batches of tabular rows."""
    return config.offline_data.input_read_batch_size or (
        EPISODES_PER_PRELEARNER_CALL if config.reads_episodes
        else ROWS_PER_PRELEARNER_CALL * config.training.train_batch_size_per_learner)
