"""``AlgorithmConfig``: one object holding an algorithm's whole configuration, built by chaining."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from connectors import ConnectorPipelineV2, ConnectorV2, default_learner_pipeline
from offline_rl.algorithms.config_builders import ConfigBuilders
from offline_rl.algorithms.config_files import (
    config_from_dict,
    config_from_file,
    config_to_dict,
    update_config,
    write_config_file,
)
from offline_rl.algorithms.registry import note_config_class
from offline_rl.core.learner_config import LearnerConfig
from offline_rl.data.source.data_config import DataConfig
from offline_rl.errors import ConfigError
from offline_rl.import_path import import_object
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.multi_rl_module import module_spec_of
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.names import DEFAULT_MODULE_ID
from offline_rl.recording.recorder_config import RecorderConfig
from offline_rl.settings.hyperparameters import Hyperparameters
from offline_rl.settings.sections import ConfigSections
from offline_rl.spaces import normalized_action_space

#: The algorithm a multi-agent config builds, imported on first use (it imports this module).
MULTI_AGENT_ALGORITHM_PATH = "offline_rl.algorithms.multi_agent_algorithm:MultiAgentAlgorithm"


class AlgorithmConfig(ConfigBuilders):
    """An algorithm's configuration: builder methods set fields and return ``self``.

    The options live in typed sections, ``config.sections.<name>`` (see ``ConfigSections``),
    each option declared once with its default and check; RLlib's flat names read and write
    them too (``config.lr`` is ``config.sections.training.lr``). The same object round-trips
    through ``to_dict``/``from_dict`` and YAML, with one mapping per builder method
    (``environment``, ``training``, ``learners``, ``offline_data``, ``evaluation``,
    ``checkpointing``, ``rl_module``, ``debugging``, ...). ``validate()`` runs every section's
    checks and those spanning sections.

    Examples:
        >>> from offline_rl import BCConfig
        >>> config = (
        ...     BCConfig()
        ...     .environment("CartPole-v1")
        ...     .training(lr=3e-3, train_batch_size_per_learner=1024)
        ...     .offline_data(input_="data/cartpole-expert")
        ...     .evaluation(evaluation_interval=5, evaluation_duration=10)
        ...     .debugging(seed=0)
        ... )
        >>> config.to_dict()["training"]["lr"], config.sections.training.lr
        (0.003, 0.003)
    """

    algo_name: ClassVar[str] = ""
    #: The algorithm's hyperparameters (``training``'s keywords beyond the shared ones).
    hyperparameters_class: ClassVar[type[Hyperparameters]] = Hyperparameters
    #: ``"package.module:Name"`` of the algorithm's ``Learner`` subclass, imported on first use
    #: (torch loads only where learners run).
    learner_class_path: ClassVar[str | None] = None
    #: ``"package.module:Name"`` of the module the algorithm trains (``None``: the default
    #: policy network); ``rl_module(rl_module_spec=...)`` may name another.
    module_class_path: ClassVar[str | None] = None
    #: The action space class the algorithm needs (``None``: ``Discrete`` or ``Box``), and
    #: what the error for another one suggests instead.
    action_space_class: ClassVar[type[gym.Space] | None] = None
    other_actions_hint: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        note_config_class(cls)

    def __init__(self) -> None:
        self.sections = ConfigSections(hyperparameters=self.hyperparameters_class())

    # ------------------------------------------------------------------------ construction
    @property
    def algo_class(self) -> type | None:
        """The ``Algorithm`` class this config builds (each algorithm's config names its own)."""
        return None

    @property
    def is_multi_agent(self) -> bool:
        """Whether the config trains several modules (``multi_agent(policies=...)``), as
        RLlib's ``AlgorithmConfig.is_multi_agent``."""
        return self.sections.multi_agent.is_multi_agent

    def get_default_learner_class(self) -> type:
        """The ``Learner`` subclass holding this algorithm's loss (``learner_class_path``,
        imported here: it imports torch)."""
        if self.learner_class_path is None:
            raise ConfigError(f"{type(self).__name__} does not name a learner; use an "
                              "algorithm config such as BCConfig")
        return import_object(self.learner_class_path)

    def build_algo(self, env: str | Callable[[dict], gym.Env] | None = None,
                   use_copy: bool = True) -> Any:
        """Validates the config and builds the algorithm (starts or connects to Ray); ``env``
        (RLlib's argument) sets ``environment(env=...)`` first, on a copy unless not
        ``use_copy``."""
        if self.algo_class is None:
            raise ConfigError(f"{type(self).__name__} builds no algorithm; use an algorithm "
                              "config such as BCConfig")
        config = self
        if env is not None:
            config = self.copy() if use_copy else self
            config.environment(env)
        if config.sections.multi_agent.is_multi_agent:
            return import_object(MULTI_AGENT_ALGORITHM_PATH)(config)
        return config.algo_class(config)

    #: RLlib's older name of ``build_algo``.
    build = build_algo

    def get_rl_module_spec(self, observation_space: gym.Space,
                           action_space: gym.Space) -> RLModuleSpec:
        """The module spec with spaces, ``model_config`` and the algorithm's module class
        filled in; ``ConfigError`` for actions the algorithm cannot learn."""
        wanted = self.action_space_class
        if action_space is not None and wanted and not isinstance(action_space, wanted):
            kind = "Box (continuous)" if wanted is gym.spaces.Box else wanted.__name__
            raise ConfigError(f"{self.algo_name} needs {kind} actions, but the action space "
                              f"is {action_space}; {self.other_actions_hint}")
        rl_module = self.sections.rl_module
        given = module_spec_of(rl_module.rl_module_spec, DEFAULT_MODULE_ID)
        spec = copy.copy(given) if given else RLModuleSpec()
        spec.module_class = spec.module_class or self.module_class_path
        spec.observation_space = spec.observation_space or self.module_observation_space(
            observation_space, action_space)
        spec.action_space = spec.action_space or action_space
        if spec.model_config is None:
            spec.model_config = DefaultModelConfig.from_dict(rl_module.model_config)
        elif not isinstance(spec.model_config, DefaultModelConfig):
            spec.model_config = DefaultModelConfig.from_dict(spec.model_config)
        return spec

    def get_default_rl_module_spec(self) -> RLModuleSpec:
        """RLlib's name for the algorithm's module spec before the spaces are known:
        ``get_rl_module_spec`` without spaces (set ``observation_space`` and ``action_space``
        on it before ``build()``), with the module class and ``model_config`` filled in."""
        return self.get_rl_module_spec(None, None)

    def given_module_spaces(self) -> tuple[gym.Space | None, gym.Space | None]:
        """``environment``'s ``observation_space``/``action_space`` as the module acts in them
        (with ``normalize_actions``, a ``Box`` action space normalized to [-1, 1]); ``None``
        for what is not given."""
        environment = self.sections.environment
        action_space = environment.action_space
        if environment.normalize_actions and action_space is not None:
            action_space = normalized_action_space(action_space)
        return environment.observation_space, action_space

    def module_observation_space(self, observation_space: gym.Space | None,
                                 action_space: gym.Space | None) -> gym.Space | None:
        """The observation space the module reads: the data's, as the custom
        ``learner_connector`` pieces change it (``FlattenObservations`` flattens it into a
        ``Box``)."""
        if self.sections.training.learner_connector is None or observation_space is None:
            return observation_space
        return self.build_learner_connector(observation_space, action_space).observation_space

    def input_spaces(self) -> tuple[gym.Space | None, gym.Space | None]:
        """The data's spaces: ``environment``'s ``observation_space``/``action_space``, else
        the env's (made, read and closed); ``None`` for what neither gives. With
        ``normalize_actions``, a ``Box`` action space is normalized to [-1, 1]."""
        environment = self.sections.environment
        spaces = environment.observation_space, environment.action_space
        if None in spaces and environment.env is not None:
            from offline_rl.evaluation.rollout import make_env

            env = make_env(environment.env, environment.env_config)
            try:
                spaces = (spaces[0] or env.observation_space, spaces[1] or env.action_space)
            finally:
                env.close()
        if environment.normalize_actions and spaces[1] is not None:
            spaces = spaces[0], normalized_action_space(spaces[1])
        return spaces

    def build_learner_connector(self, input_observation_space: gym.Space | None,
                                input_action_space: gym.Space | None,
                                device: Any = None) -> ConnectorPipelineV2:
        """The learner pipeline: custom ``learner_connector`` pieces, then the defaults.
        Override it to ``prepend``, ``insert_after`` or ``append`` pieces. ``device`` is
        RLlib's parameter, kept so that RLlib overrides run unchanged: the pipeline runs in the
        PreLearners, on CPU, whatever it is."""
        pipeline = ConnectorPipelineV2(input_observation_space, input_action_space)
        training = self.sections.training
        if training.learner_connector is not None:
            make = training.learner_connector
            custom = (import_object(make) if isinstance(make, str) else make)(
                input_observation_space, input_action_space)
            pieces = [custom] if isinstance(custom, ConnectorV2) else list(custom)
            for piece in pieces:
                pipeline.append(piece)
        if training.add_default_connectors_to_learner_pipeline:
            for piece in default_learner_pipeline(input_observation_space, input_action_space):
                pipeline.append(piece)
        return pipeline

    def data_config(self, spaces: tuple[gym.Space, gym.Space]) -> DataConfig:
        """What the data layer needs: the ``offline_data`` section, the batch size and the
        seed, with classes given as strings imported, and the learner pipeline and module spec
        built for ``spaces``."""
        sections = self.sections
        n_step, gamma = sections.hyperparameters.n_step_returns()
        return DataConfig(
            offline_data=sections.offline_data, training=sections.training,
            debugging=sections.debugging, n_step=n_step, gamma=gamma,
            prelearner_class=_as_class(sections.offline_data.prelearner_class),
            prelearner_buffer_class=_as_class(sections.offline_data.prelearner_buffer_class),
            learner_pipeline=self.build_learner_connector(*spaces),
            rl_module_spec=self.get_rl_module_spec(*spaces),
            module_id=sections.multi_agent.pipeline_module(),
            agent_ids=sections.multi_agent.agent_ids(),
            num_learners=sections.learners.num_learners)

    def learner_config(self, module_spec: RLModuleSpec) -> LearnerConfig:
        """What the learners need: the ``training``, ``learners`` and hyperparameter sections,
        the data pipeline's resources and the seed."""
        sections = self.sections
        return LearnerConfig(
            learner_class=self.get_default_learner_class(), module_spec=module_spec,
            training=sections.training, learners=sections.learners,
            hyperparameters=sections.hyperparameters, offline_data=sections.offline_data,
            debugging=sections.debugging)

    def recorder_config(self) -> RecorderConfig:
        """What a ``Recorder`` needs: the env, the env runners and the ``output*`` options."""
        sections = self.sections
        return RecorderConfig(environment=sections.environment,
                              env_runners=sections.env_runners,
                              offline_data=sections.offline_data, debugging=sections.debugging)

    def resolved_offline_data_class(self) -> type | None:
        """``offline_data_class`` as a class (``None``: offline-rl's ``OfflineData``)."""
        return _as_class(self.sections.offline_data.offline_data_class)

    # -------------------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raises ``ConfigError`` listing every invalid field with what it must be."""
        errors = [f"{field}: {problem}" for field, problem in self.problems()]
        if errors:
            raise ConfigError(f"invalid {type(self).__name__}:\n  " + "\n  ".join(errors))

    def problems(self) -> list[tuple[str, str]]:
        """``(field, problem)`` for each invalid field (see ``ConfigSections.problems``)."""
        return self.sections.problems()

    # ---------------------------------------------------------------------- serialization
    def copy(self) -> AlgorithmConfig:
        """A deep copy (spaces and callables shared)."""
        return copy.deepcopy(self)

    def to_dict(self) -> dict[str, Any]:
        """``{"algorithm": name, section: {field: value}}``, one section per builder method;
        spaces are written in RLlib's space-dict layout."""
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AlgorithmConfig:
        """Builds a config from ``to_dict``'s layout; unknown sections or keys are errors.

        The class is the registered one of ``algorithm``, or the ``config_class`` the config
        was saved from when that class is defined in this process (offline-rl never imports
        code a file names)."""
        return config_from_dict(values, cls)

    def update_from_dict(self, values: dict[str, Any]) -> AlgorithmConfig:
        """Sets ``values``: sections of ``to_dict``'s layout, or RLlib's flat keys, the old
        stack's included (``{"lr": 1e-3, "input": "/tmp/cartpole-out"}``: see
        ``flat_config``); returns ``self``."""
        return update_config(self, values)

    @classmethod
    def from_yaml(cls, path: str | Path) -> AlgorithmConfig:
        """Reads a YAML file written by ``to_yaml`` (or by hand in the same layout)."""
        return config_from_file(path, cls)

    def to_yaml(self, path: str | Path) -> None:
        """Writes the config as YAML; raises ``ConfigError`` naming a field holding a value YAML
        cannot hold (give callables as 'module:Name' strings)."""
        write_config_file(self.to_dict(), path)

    def section_options(self, section: str) -> list[str]:
        """The options of one section of ``to_dict``'s layout (a builder method's keywords)."""
        return [name for part in self.sections.parts(section) for name in part.option_names()]


def _as_class(value: type | str | None) -> type | None:
    return import_object(value) if isinstance(value, str) else value
