"""``AlgorithmConfig``: one object holding an algorithm's whole configuration, built by chaining."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
import yaml

from connectors import ConnectorPipelineV2, ConnectorV2, default_learner_pipeline
from offline_rl.core.rl_module_spec import DefaultModelConfig, RLModuleSpec, import_object
from offline_rl.data.checks import ACTION_BOUNDS_POLICIES, NONFINITE_POLICIES
from offline_rl.errors import ConfigError
from offline_rl.recording.writer import WRITE_METHODS
from offline_rl.spaces import space_from_dict, space_to_dict

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm import Algorithm


class _NotProvided:
    """Marks a builder argument the caller did not pass (``None`` is a meaningful value)."""

    def __repr__(self) -> str:
        return "NotProvided"


NotProvided: Any = _NotProvided()

#: Builder methods, in the order ``to_dict`` writes their sections.
SECTIONS = ("environment", "training", "learners", "env_runners", "offline_data", "evaluation",
            "rl_module", "debugging")
_RESERVED_ITER_KWARGS = ("batch_size", "batch_format", "drop_last")
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


class AlgorithmConfig:
    """An algorithm's configuration: builder methods set fields and return ``self``.

    The same object round-trips through ``to_dict``/``from_dict`` and YAML, with one section per
    builder method (``environment``, ``training``, ``learners``, ``offline_data``,
    ``evaluation``, ``rl_module``, ``debugging``). ``validate()`` checks everything in one place.

    Example:
        >>> from offline_rl import BCConfig
        >>> config = (
        ...     BCConfig()
        ...     .environment("CartPole-v1")
        ...     .training(lr=3e-3, train_batch_size_per_learner=1024)
        ...     .offline_data(input_="data/cartpole-expert")
        ...     .evaluation(evaluation_interval=5, evaluation_duration=10)
        ...     .debugging(seed=0)
        ... )
        >>> config.to_dict()["training"]["lr"]
        0.003
    """

    algo_name: ClassVar[str] = ""

    def __init__(self) -> None:
        # environment
        self.env: str | Callable[[dict], gym.Env] | None = None
        self.env_config: dict[str, Any] = {}
        self.observation_space: gym.Space | None = None
        self.action_space: gym.Space | None = None
        # training
        self.lr = 1e-3
        self.train_batch_size_per_learner = 1024
        self.grad_clip: float | None = None
        self.grad_clip_by = "global_norm"
        self.learner_connector: Callable[..., Any] | str | None = None
        self.add_default_connectors_to_learner_pipeline = True
        # learners
        self.num_learners = 0
        self.num_gpus_per_learner: float = 0
        self.num_cpus_per_learner: float | str = "auto"
        self.placement_strategy = "PACK"
        # env_runners (recording)
        self.num_env_runners = 1
        self.num_envs_per_env_runner = 1
        self.num_cpus_per_env_runner: float = 1
        self.batch_mode = "complete_episodes"
        # offline_data (RLlib's Input/Output API names)
        self.input_: str | list[str] | None = None
        self.input_read_method: str | Callable[..., Any] = "read_parquet"
        self.input_read_method_kwargs: dict[str, Any] = {}
        self.input_read_schema: dict[str, str] = {}
        self.input_read_episodes = False
        self.input_read_sample_batches = False
        self.input_read_batch_size: int | None = None
        self.input_filesystem: Any = None
        self.input_filesystem_kwargs: dict[str, Any] = {}
        self.input_compress_columns: list[str] = []
        self.input_nonfinite = "raise"
        self.input_action_bounds = "keep"
        self.materialize_data = False
        self.materialize_mapped_data = True
        self.map_batches_kwargs: dict[str, Any] = {}
        self.iter_batches_kwargs: dict[str, Any] = {}
        self.prelearner_class: type | str | None = None
        self.prelearner_buffer_class: type | str | None = None
        self.prelearner_buffer_kwargs: dict[str, Any] = {}
        self.prelearner_module_synch_period = 10
        self.dataset_num_iters_per_learner: int | None = None
        self.output: str | None = None
        self.output_compress_columns: list[str] = ["obs", "new_obs"]
        self.output_max_file_size = 64 * 1024 * 1024
        self.output_max_rows_per_file: int | None = None
        self.output_write_method = "write_parquet"
        self.output_write_method_kwargs: dict[str, Any] = {}
        self.output_filesystem: Any = None
        self.output_filesystem_kwargs: dict[str, Any] = {}
        self.output_write_episodes = True
        # evaluation
        self.evaluation_interval: int | None = None
        self.evaluation_duration = 10
        self.evaluation_duration_unit = "episodes"
        # rl_module
        self.model_config: dict[str, Any] = {}
        self.rl_module_spec: RLModuleSpec | None = None
        # debugging
        self.seed: int | None = None

    # ----------------------------------------------------------------------------- builders
    def environment(self, env: str | Callable[[dict], gym.Env] | None = NotProvided, *,
                    env_config: dict[str, Any] = NotProvided,
                    observation_space: gym.Space | None = NotProvided,
                    action_space: gym.Space | None = NotProvided) -> AlgorithmConfig:
        """The env used for evaluation (a gymnasium id or a creator ``env_config -> env``) and/or
        the spaces, which may be given without any env to train from data alone."""
        return self._set(locals())

    def training(self, *, lr: float = NotProvided, train_batch_size_per_learner: int = NotProvided,
                 grad_clip: float | None = NotProvided, grad_clip_by: str = NotProvided,
                 learner_connector: Callable[..., Any] | str | None = NotProvided,
                 add_default_connectors_to_learner_pipeline: bool = NotProvided
                 ) -> AlgorithmConfig:
        """Optimizer and batch settings. ``learner_connector(obs_space, act_space)`` returns
        connector piece(s) placed before the default learner pieces."""
        return self._set(locals())

    def learners(self, *, num_learners: int = NotProvided,
                 num_gpus_per_learner: float = NotProvided,
                 num_cpus_per_learner: float | str = NotProvided,
                 placement_strategy: str = NotProvided) -> AlgorithmConfig:
        """How many learners and what each gets. ``num_learners=0``: one learner in this
        process; ``N >= 1``: N Ray actors, each training on its own ``streaming_split`` shard,
        gradients averaged with ``torch.distributed``. ``num_cpus_per_learner="auto"``: 0 with a
        GPU, else 1 CPU when that fits beside the data pipeline, else 0. Learners are placed
        with a placement group (``"PACK"``, ``"SPREAD"``, ``"STRICT_PACK"``,
        ``"STRICT_SPREAD"``)."""
        return self._set(locals())

    def env_runners(self, *, num_env_runners: int = NotProvided,
                    num_envs_per_env_runner: int = NotProvided,
                    num_cpus_per_env_runner: float = NotProvided,
                    batch_mode: str = NotProvided) -> AlgorithmConfig:
        """The Ray actors that play the policy when recording (``Recorder``, or ``evaluate()``
        with ``offline_data(output=...)``): how many, envs per actor, CPUs per actor."""
        return self._set(locals())

    def offline_data(self, *, input_: str | list[str] = NotProvided,
                     input_read_method: str | Callable[..., Any] = NotProvided,
                     input_read_method_kwargs: dict[str, Any] = NotProvided,
                     input_read_schema: dict[str, str] = NotProvided,
                     input_read_episodes: bool = NotProvided,
                     input_read_sample_batches: bool = NotProvided,
                     input_read_batch_size: int | None = NotProvided,
                     input_filesystem: Any = NotProvided,
                     input_filesystem_kwargs: dict[str, Any] = NotProvided,
                     input_compress_columns: list[str] = NotProvided,
                     input_nonfinite: str = NotProvided,
                     input_action_bounds: str = NotProvided,
                     materialize_data: bool = NotProvided,
                     materialize_mapped_data: bool = NotProvided,
                     map_batches_kwargs: dict[str, Any] = NotProvided,
                     iter_batches_kwargs: dict[str, Any] = NotProvided,
                     prelearner_class: type | str | None = NotProvided,
                     prelearner_buffer_class: type | str | None = NotProvided,
                     prelearner_buffer_kwargs: dict[str, Any] = NotProvided,
                     prelearner_module_synch_period: int = NotProvided,
                     dataset_num_iters_per_learner: int | None = NotProvided,
                     output: str | None = NotProvided,
                     output_compress_columns: list[str] = NotProvided,
                     output_max_file_size: int = NotProvided,
                     output_max_rows_per_file: int | None = NotProvided,
                     output_write_method: str = NotProvided,
                     output_write_method_kwargs: dict[str, Any] = NotProvided,
                     output_filesystem: Any = NotProvided,
                     output_filesystem_kwargs: dict[str, Any] = NotProvided,
                     output_write_episodes: bool = NotProvided) -> AlgorithmConfig:
        """Where the data is and how it is read, mapped and iterated (RLlib's Input/Output
        API names; see README, 'Your data'). Two are offline-rl's own: ``input_nonfinite``, what
        to do with NaN/inf in observations or rewards, ``"raise"`` (default) or ``"drop"`` (drop
        the row or episode and count it in the results); ``input_action_bounds``, what to do
        with ``Box`` actions outside the action space, ``"keep"`` (default: RLlib records the
        sampled, unclipped action), ``"clip"`` or ``"raise"``; they are counted either way.
        ``dataset_num_iters_per_learner``: updates per learner per ``train()``; ``None`` runs one
        full epoch of each learner's shard."""
        return self._set(locals())

    def evaluation(self, *, evaluation_interval: int | None = NotProvided,
                   evaluation_duration: int = NotProvided,
                   evaluation_duration_unit: str = NotProvided) -> AlgorithmConfig:
        """Run the greedy policy in the env for ``evaluation_duration`` episodes every
        ``evaluation_interval`` training iterations (``None``: only on ``evaluate()``)."""
        return self._set(locals())

    def rl_module(self, *, model_config: dict[str, Any] | DefaultModelConfig = NotProvided,
                  rl_module_spec: RLModuleSpec | None = NotProvided) -> AlgorithmConfig:
        """The policy network: ``model_config`` keys (``fcnet_hiddens``, ``fcnet_activation``,
        ...) for the default module, or a full ``RLModuleSpec``."""
        if isinstance(model_config, DefaultModelConfig):
            model_config = model_config.to_dict()
        return self._set(locals())

    def debugging(self, *, seed: int | None = NotProvided) -> AlgorithmConfig:
        """Seeds torch, data shuffling and evaluation episodes for reproducible runs."""
        return self._set(locals())

    def _set(self, arguments: dict[str, Any]) -> AlgorithmConfig:
        for name, value in arguments.items():
            if name != "self" and value is not NotProvided:
                setattr(self, name, value)
        return self

    # ------------------------------------------------------------------------ construction
    @property
    def algo_class(self) -> type[Algorithm]:
        """The ``Algorithm`` class this config builds."""
        from offline_rl.algorithms.algorithm import Algorithm

        return Algorithm

    def get_default_learner_class(self) -> type:
        """The ``Learner`` subclass holding this algorithm's loss (imports torch)."""
        raise TypeError(f"{type(self).__name__} does not name a learner; use an algorithm "
                        "config such as BCConfig")

    def build(self) -> Algorithm:
        """Validates the config and builds the algorithm (starts or connects to Ray)."""
        return self.algo_class(self)

    def get_rl_module_spec(self, observation_space: gym.Space,
                           action_space: gym.Space) -> RLModuleSpec:
        """The module spec with spaces and ``model_config`` filled in."""
        spec = copy.copy(self.rl_module_spec) if self.rl_module_spec else RLModuleSpec()
        spec.observation_space = spec.observation_space or observation_space
        spec.action_space = spec.action_space or action_space
        if spec.model_config is None:
            spec.model_config = DefaultModelConfig.from_dict(self.model_config)
        return spec

    def build_learner_connector(self, input_observation_space: gym.Space | None,
                                input_action_space: gym.Space | None) -> ConnectorPipelineV2:
        """The learner pipeline: custom ``learner_connector`` pieces, then the defaults."""
        pipeline = ConnectorPipelineV2(input_observation_space, input_action_space)
        if self.learner_connector is not None:
            make = self.learner_connector
            custom = (import_object(make) if isinstance(make, str) else make)(
                input_observation_space, input_action_space)
            pieces = [custom] if isinstance(custom, ConnectorV2) else list(custom)
            for piece in pieces:
                pipeline.append(piece)
        if self.add_default_connectors_to_learner_pipeline:
            for piece in default_learner_pipeline(input_observation_space, input_action_space):
                pipeline.append(piece)
        return pipeline

    def resolved_prelearner_class(self) -> type:
        """``prelearner_class`` as a class (``OfflinePreLearner`` by default)."""
        from offline_rl.data.prelearner import OfflinePreLearner

        if self.prelearner_class is None:
            return OfflinePreLearner
        cls = self.prelearner_class
        return import_object(cls) if isinstance(cls, str) else cls

    # -------------------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raises ``ValueError`` listing every invalid field with what it must be."""
        errors = [f"{field}: {problem}" for field, problem in self._problems()]
        if errors:
            raise ConfigError(f"invalid {type(self).__name__}:\n  " + "\n  ".join(errors))

    def _problems(self) -> list[tuple[str, str]]:
        from offline_rl.data.input_reader import resolve_filesystem

        problems = []

        def check(ok: bool, field: str, problem: str) -> None:
            if not ok:
                problems.append((field, problem))

        has_spaces = self.observation_space is not None and self.action_space is not None
        check(self.env is not None or has_spaces, "environment",
              "set env=, or both observation_space= and action_space=")
        check(bool(self.input_), "input_", "set the path(s) of the data to train on")
        check(_positive(self.lr), "lr", f"must be a number > 0, got {self.lr!r}")
        check(_positive_int(self.train_batch_size_per_learner), "train_batch_size_per_learner",
              f"must be an int >= 1, got {self.train_batch_size_per_learner!r}")
        check(self.grad_clip is None or _positive(self.grad_clip), "grad_clip",
              f"must be None or a number > 0, got {self.grad_clip!r}")
        check(self.grad_clip_by in ("value", "norm", "global_norm"), "grad_clip_by",
              f"must be 'value', 'norm' or 'global_norm', got {self.grad_clip_by!r}")
        check(_non_negative_int(self.num_learners), "num_learners",
              f"must be an int >= 0, got {self.num_learners!r}")
        check(self.num_cpus_per_learner == "auto" or _non_negative(self.num_cpus_per_learner),
              "num_cpus_per_learner",
              f"must be 'auto' or a number >= 0, got {self.num_cpus_per_learner!r}")
        check(self.placement_strategy in PLACEMENT_STRATEGIES, "placement_strategy",
              f"must be one of {PLACEMENT_STRATEGIES}, got {self.placement_strategy!r}")
        check(_non_negative(self.num_gpus_per_learner), "num_gpus_per_learner",
              f"must be a number >= 0, got {self.num_gpus_per_learner!r}")
        check(not (self.num_gpus_per_learner and self.num_cpus_per_learner != "auto"),
              "num_cpus_per_learner", "set either num_gpus_per_learner or num_cpus_per_learner")
        check(self.dataset_num_iters_per_learner is None
              or _positive_int(self.dataset_num_iters_per_learner),
              "dataset_num_iters_per_learner",
              f"must be None or an int >= 1, got {self.dataset_num_iters_per_learner!r}")
        check(_positive_int(self.prelearner_module_synch_period),
              "prelearner_module_synch_period",
              f"must be an int >= 1, got {self.prelearner_module_synch_period!r}")
        check(self.input_read_batch_size is None or _positive_int(self.input_read_batch_size),
              "input_read_batch_size",
              f"must be None or an int >= 1, got {self.input_read_batch_size!r}")
        try:
            resolve_filesystem(self.input_filesystem, self.input_filesystem_kwargs)
        except ValueError as error:
            problems.append(("input_filesystem", str(error)))
        check(not (self.input_read_episodes and self.input_read_sample_batches),
              "input_read_episodes", "input_read_episodes and input_read_sample_batches are both "
              "set; choose the one format the data is in")
        check(self.input_nonfinite in NONFINITE_POLICIES, "input_nonfinite",
              f"must be one of {NONFINITE_POLICIES}, got {self.input_nonfinite!r}")
        check(self.input_action_bounds in ACTION_BOUNDS_POLICIES, "input_action_bounds",
              f"must be one of {ACTION_BOUNDS_POLICIES}, got {self.input_action_bounds!r}")
        check(isinstance(self.input_compress_columns, list | tuple), "input_compress_columns",
              f"must be a list of column names, got {self.input_compress_columns!r}")
        check(isinstance(self.input_read_method, str) or callable(self.input_read_method),
              "input_read_method", "must be a ray.data.read_* name or a callable")
        check("batch_size" not in self.map_batches_kwargs, "map_batches_kwargs",
              "batch_size is chosen by offline-rl (set input_read_batch_size instead)")
        reserved = [k for k in _RESERVED_ITER_KWARGS if k in self.iter_batches_kwargs]
        check(not reserved, "iter_batches_kwargs",
              f"{reserved} are set by offline-rl: train batches hold exactly "
              "train_batch_size_per_learner rows")
        check(self.output is None or isinstance(self.output, str), "output",
              f"must be one path or URI (a str), got {self.output!r}; recordings go to one place")
        check(self.output_write_method in WRITE_METHODS, "output_write_method",
              f"must be one of {sorted(WRITE_METHODS)}, got {self.output_write_method!r}")
        check(not (self.output_write_episodes and self.output_write_method != "write_parquet"),
              "output_write_method", "episodes (output_write_episodes=True) are written as "
              "Parquet; use write_parquet or set output_write_episodes=False")
        check(self.output_max_rows_per_file is None or _positive_int(self.output_max_rows_per_file),
              "output_max_rows_per_file",
              f"must be None or an int >= 1, got {self.output_max_rows_per_file!r}")
        check(_positive_int(self.output_max_file_size), "output_max_file_size",
              f"must be an int >= 1 (bytes), got {self.output_max_file_size!r}")
        check(_positive_int(self.num_env_runners), "num_env_runners",
              f"must be an int >= 1, got {self.num_env_runners!r}")
        check(_positive_int(self.num_envs_per_env_runner), "num_envs_per_env_runner",
              f"must be an int >= 1, got {self.num_envs_per_env_runner!r}")
        check(_non_negative(self.num_cpus_per_env_runner), "num_cpus_per_env_runner",
              f"must be a number >= 0, got {self.num_cpus_per_env_runner!r}")
        check(self.batch_mode == "complete_episodes", "batch_mode",
              f"must be 'complete_episodes' (offline data holds whole episodes), got "
              f"{self.batch_mode!r}")
        check(self.evaluation_interval is None or _positive_int(self.evaluation_interval),
              "evaluation_interval",
              f"must be None or an int >= 1, got {self.evaluation_interval!r}")
        check(_positive_int(self.evaluation_duration), "evaluation_duration",
              f"must be an int >= 1, got {self.evaluation_duration!r}")
        check(self.evaluation_duration_unit == "episodes", "evaluation_duration_unit",
              f"must be 'episodes', got {self.evaluation_duration_unit!r}")
        check(self.evaluation_interval is None or self.env is not None, "evaluation_interval",
              "evaluation needs an env: set config.environment(env=...)")
        try:
            DefaultModelConfig.from_dict(self.model_config)
        except (TypeError, ValueError) as error:
            problems.append(("model_config", str(error)))
        return problems

    # ---------------------------------------------------------------------- serialization
    def copy(self) -> AlgorithmConfig:
        """A deep copy (spaces and callables shared)."""
        return copy.deepcopy(self)

    def to_dict(self) -> dict[str, Any]:
        """``{"algorithm": name, section: {field: value}}``, one section per builder method;
        spaces are written in RLlib's space-dict layout."""
        result: dict[str, Any] = {"algorithm": self.algo_name}
        for section in SECTIONS:
            values = {name: getattr(self, name) for name in self._section_fields(section)}
            for name in ("observation_space", "action_space"):
                if isinstance(values.get(name), gym.Space):
                    values[name] = space_to_dict(values[name])
            result[section] = values
        return result

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AlgorithmConfig:
        """Builds a config from ``to_dict``'s layout; unknown sections or keys are errors."""
        from offline_rl.algorithms import get_algorithm_config_class

        values = dict(values)
        name = values.pop("algorithm", None) or cls.algo_name
        config_cls = get_algorithm_config_class(name) if name else cls
        config = config_cls()
        for section, options in values.items():
            if section not in SECTIONS:
                raise ConfigError(f"unknown config section {section!r}; sections are "
                                 f"{['algorithm', *SECTIONS]}")
            options = dict(options or {})
            unknown = sorted(set(options) - set(config._section_fields(section)))
            if unknown:
                raise ConfigError(f"unknown key(s) {unknown} in section {section!r}; valid keys: "
                                 f"{config._section_fields(section)}")
            for space in ("observation_space", "action_space"):
                if isinstance(options.get(space), dict):
                    options[space] = space_from_dict(options[space])
            getattr(config, section)(**options)
        return config

    @classmethod
    def from_yaml(cls, path: str | Path) -> AlgorithmConfig:
        """Reads a YAML file written by ``to_yaml`` (or by hand in the same layout)."""
        values = yaml.safe_load(Path(path).read_text())
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a mapping of config sections, got "
                             f"{type(values).__name__}")
        return cls.from_dict(values)

    def to_yaml(self, path: str | Path) -> None:
        """Writes the config as YAML (callables must be given as 'module:Name' strings)."""
        Path(path).write_text(yaml.safe_dump(_yaml_safe(self.to_dict()), sort_keys=False))

    def _section_fields(self, section: str) -> list[str]:
        parameters = inspect.signature(getattr(self, section)).parameters
        return [name for name in parameters if name in vars(self)]


def _yaml_safe(value: Any, where: str = "config") -> Any:
    if isinstance(value, dict):
        return {k: _yaml_safe(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_yaml_safe(v, where) for v in value]
    if isinstance(value, type):
        return f"{value.__module__}:{value.__qualname__}"
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ConfigError(f"{where} = {value!r} cannot be written to YAML; give classes and "
                     "functions as 'package.module:Name' strings")


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _non_negative(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _non_negative_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
