"""``DataConfig``: what the data pipeline reads, maps and iterates, and nothing else.

``AlgorithmConfig.data_config(spaces)`` builds it from the config's own section objects (the
``offline_data``, ``training`` and ``debugging`` sections themselves, not copies) plus what is
built for the data's spaces; the data layer (``OfflineData``, the PreLearners, the readers)
never sees the algorithm's config. RLlib's flat names read through to the sections, so a custom
PreLearner reads ``self.config.input_read_schema`` as it would in RLlib. It is sent to every
PreLearner actor: unpickling it imports neither torch nor any algorithm.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import pyarrow as pa
import pyarrow.compute as pc

from connectors import ConnectorPipelineV2, default_learner_pipeline
from offline_rl.columns import Columns
from offline_rl.data.source.input_api import InputCreator, input_creator
from offline_rl.data.source.input_files import read_method_suffixes
from offline_rl.data.source.input_listing import InputListing
from offline_rl.filesystems import resolve_filesystem
from offline_rl.formats.tabular import resolve_schema
from offline_rl.models.multi_rl_module import MultiRLModuleSpec
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.names import DEFAULT_MODULE_ID
from offline_rl.settings.debugging import DebuggingConfig
from offline_rl.settings.flat_access import FlatAccess
from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.training import TrainingConfig

#: The ``offline_data`` options that decide which files ``DataConfig.input_listing`` lists.
LISTED_BY = ("input_", "input_filesystem", "input_filesystem_kwargs", "input_read_method")


@dataclass
class DataConfig(FlatAccess):
    """The data layer's settings (see ``AlgorithmConfig.offline_data`` for each option).

    Examples:
        >>> import gymnasium as gym
        >>> config = DataConfig(OfflineDataConfig(input_="data/cartpole-expert"),
        ...                     TrainingConfig(train_batch_size_per_learner=256))
        >>> config.reads_episodes, config.train_batch_size_per_learner
        (False, 256)
        >>> pipeline = config.build_learner_connector(gym.spaces.Box(-1, 1, (4,)),
        ...                                           gym.spaces.Discrete(2))
        >>> [piece.name for piece in pipeline][-1]
        'BatchIndividualItems'
    """

    offline_data: OfflineDataConfig = field(default_factory=OfflineDataConfig)
    #: Its ``train_batch_size_per_learner`` sizes the batches.
    training: TrainingConfig = field(default_factory=TrainingConfig)
    #: Its ``seed`` seeds shuffling and sampling.
    debugging: DebuggingConfig = field(default_factory=DebuggingConfig)
    #: Steps per sampled transition of episode inputs (TD algorithms' ``n_step``), and the
    #: discount of the rewards summed over them.
    n_step: int = 1
    gamma: float = 1.0
    #: ``offline_data``'s ``prelearner_class`` as a class (``OfflinePreLearner`` when ``None``).
    prelearner_class: type | None = None
    #: ``offline_data``'s ``prelearner_buffer_class`` as a class (``EpisodeReplayBuffer`` when
    #: ``None``).
    prelearner_buffer_class: type | None = None
    #: The learner connector pipeline, built by the algorithm's config for the data's spaces.
    learner_pipeline: ConnectorPipelineV2 | None = None
    #: The policy module's spec, for connector pieces that need the module.
    rl_module_spec: RLModuleSpec | None = None
    #: ``offline_data``'s ``input_`` as a custom input's creator (a name ``register_input``
    #: registered is looked up where the config is made, in the driver), else ``None``.
    input_creator: InputCreator | None = None
    #: The share of each train batch that ``input_``'s ``"sampler"`` supplies (0: none). A mix
    #: of one offline source and the sampler reads that source alone, with its read options.
    sampler_weight: float = 0.0
    #: The module this pipeline trains, of a multi-agent config (``None``: single-agent):
    #: it reads the rows of the agents ``agent_ids`` (tabular rows name their agent in
    #: ``agent_id``), or that module's batches of old-stack ``MultiAgentBatch`` lines.
    module_id: str | None = None
    agent_ids: tuple[str, ...] | None = None
    #: The learners the data is split between (``0``: one, in the driver); with the options,
    #: it decides the pipeline's ``ExecutionPlan``.
    num_learners: int = 0

    def __post_init__(self) -> None:
        if self.agent_ids is not None and not self.reads_episodes:
            self.offline_data = dataclasses.replace(
                self.offline_data, input_read_method_kwargs=with_agent_filter(
                    self.offline_data.input_read_method_kwargs,
                    resolve_schema(self.offline_data.input_read_schema)[Columns.AGENT_ID],
                    self.agent_ids))
        spec = self.offline_data.input_spec
        if spec.mixed:
            self.sampler_weight = spec.sampler_share
            if len(spec.sources) == 1:  # several: MixedData's to mix
                (source,) = spec.sources
                self.offline_data = dataclasses.replace(self.offline_data, input_=source.input_,
                                                        **source.options)
        if self.input_creator is None:
            self.input_creator = input_creator(self.offline_data.input_)

    @property
    def reads_episodes(self) -> bool:
        """Whether the input holds whole episodes (msgpack episodes, SampleBatch JSON, or a
        custom input's SampleBatches)."""
        return self.offline_data.reads_episodes or self.input_creator is not None

    @functools.cached_property
    def input_listing(self) -> InputListing:
        """The input files, listed the first time this is asked (``check_input``, before any
        Ray work) and carried with this config, to the PreLearners too: the one listing that
        the checks, the read and the messages naming a file read. A copy
        (``with_data_options``) lists its own input again when asked."""
        options = self.offline_data
        return InputListing.of(
            options.input_,
            resolve_filesystem(options.input_filesystem, options.input_filesystem_kwargs),
            read_method_suffixes(options.input_read_method))

    def with_data_options(self, **changes: Any) -> DataConfig:
        """A copy whose ``offline_data`` section is a copy with ``changes`` (the other
        sections shared), and this config's ``input_listing`` when it has one and ``changes``
        leave the input's files as they are (no ``LISTED_BY`` option changes)."""
        copied = dataclasses.replace(
            self, offline_data=dataclasses.replace(self.offline_data, **changes))
        if "input_listing" in vars(self) and not changes.keys() & set(LISTED_BY):
            vars(copied)["input_listing"] = self.input_listing
        return copied

    def build_learner_connector(self, input_observation_space: gym.Space | None,
                                input_action_space: gym.Space | None) -> ConnectorPipelineV2:
        """A fresh copy of the learner connector pipeline (RLlib's name for building it); the
        default pipeline when the config holds none."""
        if self.learner_pipeline is None:
            return default_learner_pipeline(input_observation_space, input_action_space)
        return copy.deepcopy(self.learner_pipeline)

    def module_spec(self) -> MultiRLModuleSpec | None:
        """What RLlib gives PreLearners as ``module_spec``: the policy module's spec as a
        ``MultiRLModuleSpec`` of ``DEFAULT_MODULE_ID`` (``None`` without a spec)."""
        spec = self.rl_module_spec
        return None if spec is None else MultiRLModuleSpec({DEFAULT_MODULE_ID: spec})


def with_agent_filter(read_kwargs: dict[str, Any], agent_column: str,
                      agent_ids: tuple[str, ...]) -> dict[str, Any]:
    """``read_kwargs`` whose ``filter`` (Ray Data's and pyarrow's row filter, pushed down into
    the Parquet reads) also keeps only the rows of ``agent_ids``.

    Examples:
        >>> with_agent_filter({}, "agent_id", ("a",))["filter"]
        <pyarrow.compute.Expression is_in(agent_id, {value_set=string:[
          "a"
        ], null_matching_behavior=MATCH})>
    """
    keep = pc.field(agent_column).isin(pa.array(agent_ids, pa.string()))
    given = read_kwargs.get("filter")
    return {**read_kwargs, "filter": keep if given is None else given & keep}


def input_spaces(config: object, spaces: tuple[gym.Space | None, gym.Space | None] | None
                 ) -> tuple[gym.Space | None, gym.Space | None]:
    """``spaces`` when given; else those of ``config``: a ``DataConfig``'s module spec's, an
    algorithm's config's ``input_spaces()`` (its environment's, or its env's); ``(None, None)``
    when it has none (as RLlib's ``OfflineData(config)`` and ``OfflinePreLearner(config=...)``
    are built)."""
    if spaces is not None:
        return tuple(spaces)
    if isinstance(config, DataConfig):
        spec = config.rl_module_spec
        return (None, None) if spec is None else (spec.observation_space, spec.action_space)
    return config.input_spaces()


def as_data_config(config: object, spaces: tuple[gym.Space, gym.Space]) -> DataConfig:
    """``config`` itself when it is a ``DataConfig``; else an algorithm's config (as RLlib's
    PreLearners and ``OfflineData`` take), whose ``data_config(spaces)`` is used."""
    return config if isinstance(config, DataConfig) else config.data_config(spaces)
