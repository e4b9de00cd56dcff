"""``AlgorithmConfig``: one object holding an algorithm's whole configuration, built by chaining."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Collection, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from connectors import ConnectorPipelineV2, ConnectorV2, default_learner_pipeline
from offline_rl.algorithms.config_files import (
    config_from_dict,
    config_from_file,
    config_to_dict,
    update_config,
    write_config_file,
)
from offline_rl.algorithms.flat_config import evaluation_overrides, unknown_keys
from offline_rl.algorithms.registry import note_config_class
from offline_rl.core.learner_config import LearnerConfig
from offline_rl.data.data_config import DataConfig
from offline_rl.errors import ConfigError
from offline_rl.import_path import import_object
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.multi_rl_module import MultiRLModuleSpec, module_spec_of
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.names import DEFAULT_MODULE_ID
from offline_rl.recording.recorder_config import RecorderConfig
from offline_rl.settings.flat_access import FlatAccess
from offline_rl.settings.hyperparameters import Hyperparameters
from offline_rl.settings.learning_rates import LearningRate
from offline_rl.settings.options import NotProvided, Section, is_int_at_least
from offline_rl.settings.sections import ConfigSections
from offline_rl.spaces import normalized_action_space

#: The algorithm a multi-agent config builds, imported on first use (it imports this module).
MULTI_AGENT_ALGORITHM_PATH = "offline_rl.algorithms.multi_agent_algorithm:MultiAgentAlgorithm"


class AlgorithmConfig(FlatAccess):
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

    # ----------------------------------------------------------------------------- builders
    def environment(self, env: str | Callable[[dict], gym.Env] | None = NotProvided, *,
                    env_config: dict[str, Any] = NotProvided,
                    observation_space: gym.Space | None = NotProvided,
                    action_space: gym.Space | None = NotProvided,
                    normalize_actions: bool = NotProvided,
                    clip_actions: bool = NotProvided) -> AlgorithmConfig:
        """The env used for evaluation (a gymnasium id or a creator ``env_config -> env``) and/or
        the spaces, which may be given without any env to train from data alone.
        ``normalize_actions=True``: the module acts in [-1, 1] on a ``Box`` (as RLlib's
        recorded actions are), unsquashed onto the env's bounds in the env;
        ``clip_actions=True``: actions are clipped before the env takes them."""
        return self._set(self.sections.environment, locals())

    def training(self, *, lr: LearningRate = NotProvided,
                 train_batch_size_per_learner: int = NotProvided,
                 train_batch_size: int = NotProvided,
                 grad_clip: float | None = NotProvided, grad_clip_by: str = NotProvided,
                 learner_connector: Callable[..., Any] | str | None = NotProvided,
                 add_default_connectors_to_learner_pipeline: bool = NotProvided,
                 training_intensity: float | None = NotProvided) -> AlgorithmConfig:
        """Optimizer and batch settings. ``lr`` is a number or a schedule
        ``[[timestep, lr], ...]`` (linear between points; the timestep counts the rows
        trained on, over all learners), as is every ``*_lr`` of the algorithms.
        ``train_batch_size`` is RLlib's total form: the rows of one update over all
        learners, divided among the learners configured when it is given (call
        ``learners()`` first); ``train_batch_size_per_learner``, given too, wins, as in RLlib.
        ``learner_connector(obs_space, act_space)`` returns connector piece(s) placed before
        the default learner pieces. ``training_intensity``: with ``"sampler"`` in ``input_``,
        the online rows trained per env step sampled (default 1)."""
        if train_batch_size is not NotProvided and train_batch_size_per_learner is NotProvided:
            train_batch_size_per_learner = per_learner_batch_size(
                train_batch_size, self.sections.learners.num_learners)
        return self._set(self.sections.training, locals())

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
        return self._set(self.sections.learners, locals())

    def api_stack(self, enable_rl_module_and_learner: bool | None = NotProvided,
                  enable_env_runner_and_connector_v2: bool | None = NotProvided
                  ) -> AlgorithmConfig:
        """RLlib's choice of API stack: offline-rl has only the new one (RLModules, Learners,
        EnvRunners and ConnectorV2), so ``True`` (or unset) keeps it and ``False`` is a
        ``ConfigError`` saying so."""
        for name, value in (("enable_rl_module_and_learner", enable_rl_module_and_learner),
                            ("enable_env_runner_and_connector_v2",
                             enable_env_runner_and_connector_v2)):
            if value is not NotProvided and value is not None and value is not True:
                raise ConfigError(
                    f"api_stack({name}={value!r}): offline-rl has RLlib's new API stack only "
                    "(RLModules, Learners, EnvRunners, ConnectorV2); drop the api_stack() call "
                    "or set it True. Old-stack configs (flat keys) are read with "
                    "AlgorithmConfig.from_dict and translated")
        return self

    def resources(self, *, num_cpus_for_main_process: float | str = NotProvided
                  ) -> AlgorithmConfig:
        """CPUs the algorithm's own process reserves as a Ray Tune trial ("auto": see trainable)."""
        return self._set(self.sections.resources, locals())

    def env_runners(self, *, num_env_runners: int = NotProvided,
                    num_envs_per_env_runner: int = NotProvided,
                    num_cpus_per_env_runner: float | str = NotProvided,
                    batch_mode: str = NotProvided,
                    rollout_fragment_length: int | str = NotProvided,
                    max_episode_steps: int | None = NotProvided,
                    sample_timeout_s: float | None = NotProvided) -> AlgorithmConfig:
        """The Ray actors that play the policy when recording (``Recorder``, or ``evaluate()``
        with ``offline_data(output=...)``) and for the ``"sampler"`` of ``input_``: how many
        (0, RLlib's "no remote runners", plays with one), envs per actor, CPUs per actor
        ("auto": 1 where they fit beside the rest of the run, else 0, sharing the CPUs).
        ``max_episode_steps`` cuts every episode offline-rl plays (evaluation's too) at that
        many steps (``None``: the env spec's); an episode of theirs that runs
        ``sample_timeout_s`` seconds without ending raises ``EnvError``. ``batch_mode`` and
        ``rollout_fragment_length`` size ``OfflineSingleAgentEnvRunner.sample()`` (see
        ``EnvRunnersConfig``); the sampler plays whole episodes, as many steps as
        ``training_intensity`` asks."""
        return self._set(self.sections.env_runners, locals())

    def offline_data(self, *, input_: str | list[str] | Callable[..., Any] = NotProvided,
                     input_config: dict[str, Any] = NotProvided,
                     input_reader_max_rows: int = NotProvided,
                     input_reader_timeout_s: float = NotProvided,
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
                     input_obs_bounds: str = NotProvided,
                     input_action_bounds: str = NotProvided,
                     input_actions_normalized: bool = NotProvided,
                     ignore_final_observation: bool = NotProvided,
                     materialize_data: bool = NotProvided,
                     materialize_mapped_data: bool = NotProvided,
                     map_batches_kwargs: dict[str, Any] = NotProvided,
                     iter_batches_kwargs: dict[str, Any] = NotProvided,
                     prelearner_class: type | str | None = NotProvided,
                     prelearner_buffer_class: type | str | None = NotProvided,
                     prelearner_buffer_kwargs: dict[str, Any] = NotProvided,
                     prelearner_kwargs: dict[str, Any] = NotProvided,
                     prelearner_module_synch_period: int = NotProvided,
                     prelearner_use_recorded_module_states: bool = NotProvided,
                     offline_sampling: bool = NotProvided,
                     offline_data_class: type | str | None = NotProvided,
                     dataset_num_iters_per_learner: int | None = NotProvided,
                     output: str | Callable[..., Any] | None = NotProvided,
                     output_config: dict[str, Any] = NotProvided,
                     output_compress_columns: list[str] = NotProvided,
                     output_max_file_size: int = NotProvided,
                     output_max_rows_per_file: int | None = NotProvided,
                     output_write_remaining_data: bool = NotProvided,
                     output_write_method: str = NotProvided,
                     output_write_method_kwargs: dict[str, Any] = NotProvided,
                     output_filesystem: Any = NotProvided,
                     output_filesystem_kwargs: dict[str, Any] = NotProvided,
                     output_write_episodes: bool = NotProvided,
                     output_write_sample_batches: bool = NotProvided,
                     actions_in_input_normalized: bool = NotProvided,
                     postprocess_inputs: bool = NotProvided,
                     shuffle_buffer_size: int = NotProvided) -> AlgorithmConfig:
        """Where the data is and how it is read, mapped, iterated and written, with RLlib's
        Input/Output API names and a few of offline-rl's own (what to do with non-finite or
        out-of-bounds values); each option is documented on ``OfflineDataConfig``. ``input_``
        and ``output`` may also be creators of ``InputReader``s and ``OutputWriter``s (RLlib's
        old stack; see ``offline_rl.data.custom_input``). RLlib's old-stack keywords
        (``actions_in_input_normalized``, ``postprocess_inputs``, ``shuffle_buffer_size``) are
        checked and translated as the old stack's keys are (``flat_config``)."""
        old_stack = {name: value for name, value in (
            ("actions_in_input_normalized", actions_in_input_normalized),
            ("postprocess_inputs", postprocess_inputs),
            ("shuffle_buffer_size", shuffle_buffer_size)) if value is not NotProvided}
        self._set(self.sections.offline_data, locals())
        if old_stack:
            with warnings.catch_warnings():  # the keywords are RLlib 2.60's own: no warning
                warnings.simplefilter("ignore")
                update_config(self, old_stack)
        return self

    def evaluation(self, *, evaluation_interval: int | None = NotProvided,
                   evaluation_duration: int = NotProvided,
                   evaluation_duration_unit: str = NotProvided,
                   evaluation_num_env_runners: int = NotProvided,
                   evaluation_num_workers: int = NotProvided,
                   evaluation_parallel_to_training: bool = NotProvided,
                   evaluation_sample_timeout_s: float | None = NotProvided,
                   off_policy_estimation_methods: dict[str, dict[str, Any]] = NotProvided,
                   evaluation_config: dict[str, Any] = NotProvided,
                   offline_evaluation_interval: int | None = NotProvided,
                   offline_eval_input_: str | list[str] | None = NotProvided,
                   num_offline_eval_runners: int = NotProvided,
                   offline_evaluation_type: str = NotProvided,
                   offline_eval_runner_class: type | None = NotProvided,
                   offline_loss_for_module_fn: Callable[..., Any] | None = NotProvided,
                   offline_eval_batch_size_per_runner: int = NotProvided,
                   dataset_num_iters_per_offline_eval_runner: int | None = NotProvided,
                   offline_eval_rl_module_inference_only: bool = NotProvided,
                   num_cpus_per_offline_eval_runner: float | str = NotProvided,
                   num_gpus_per_offline_eval_runner: float = NotProvided,
                   custom_resources_per_offline_eval_runner: dict[str, float] = NotProvided,
                   offline_evaluation_timeout_s: float | None = NotProvided,
                   max_requests_in_flight_per_offline_eval_runner: int = NotProvided,
                   broadcast_offline_eval_runner_states: bool = NotProvided,
                   validate_offline_eval_runners_after_construction: bool = NotProvided,
                   restart_failed_offline_eval_runners: bool = NotProvided,
                   ignore_offline_eval_runner_failures: bool = NotProvided,
                   max_num_offline_eval_runner_restarts: int = NotProvided,
                   offline_eval_runner_health_probe_timeout_s: float = NotProvided,
                   offline_eval_runner_restore_timeout_s: float = NotProvided
                   ) -> AlgorithmConfig:
        """Run the greedy policy in the env for ``evaluation_duration`` episodes every
        ``evaluation_interval`` training iterations (``None``: only on ``evaluate()``).
        ``evaluation_num_env_runners``: Ray actors that share the episodes (0: this process
        plays them; each actor takes ``num_cpus_per_env_runner`` CPUs); with
        ``evaluation_parallel_to_training`` they play while the iteration trains, with the
        weights from before it, as RLlib's do. An evaluation episode that runs
        ``evaluation_sample_timeout_s`` seconds without ending raises ``EnvError``.

        Without an env (or beside it): ``off_policy_estimation_methods``, ``{name: {"type":
        estimator, **its arguments}}`` (see ``OffPolicyEvaluation``), estimate the policy's
        value on ``evaluation_config``'s data (``offline_data`` settings, ``input_`` at least)
        into ``result["evaluation"]["off_policy_estimation"][name]``; every
        ``offline_evaluation_interval`` iterations the learner's loss terms on
        ``offline_eval_input_`` go to ``result["evaluation"]["offline_eval_runners"]``
        (see ``HeldOutLosses``). RLlib 2.60's other offline-evaluation keywords set up
        ``OfflineEvaluationRunner`` (each is documented on ``EvaluationConfig``). The old
        stack's ``evaluation_num_workers`` and ``evaluation_config`` keys (``{"input": ...}``)
        are translated, with a warning."""
        if evaluation_num_workers is not NotProvided:
            if evaluation_num_env_runners is not NotProvided:
                raise ConfigError("evaluation_num_workers is the old stack's name of "
                                  "evaluation_num_env_runners; give one of them")
            self.update_from_dict({"evaluation_num_workers": evaluation_num_workers})
        if evaluation_config is not NotProvided:
            evaluation_config = evaluation_overrides(evaluation_config, self)
        return self._set(self.sections.evaluation, locals())

    def reporting(self, *, min_time_s_per_iteration: float | None = NotProvided,
                  min_train_timesteps_per_iteration: int | None = NotProvided,
                  min_sample_timesteps_per_iteration: int | None = NotProvided,
                  metrics_num_episodes_for_smoothing: int | None = NotProvided,
                  keep_per_episode_custom_metrics: bool = NotProvided,
                  metrics_episode_collection_timeout_s: float = NotProvided,
                  log_gradients: bool = NotProvided,
                  custom_stats_cls_lookup: dict[str, type] = NotProvided) -> AlgorithmConfig:
        """RLlib's reporting settings: each ``train()`` repeats its round of updates until
        ``min_time_s_per_iteration`` seconds, ``min_train_timesteps_per_iteration`` rows
        trained and ``min_sample_timesteps_per_iteration`` rows read have passed;
        ``metrics_num_episodes_for_smoothing`` averages the evaluation's return over the last
        N episodes. The others are RLlib's metrics machinery: their defaults are taken, other
        values refused (see ``ReportingConfig``)."""
        return self._set(self.sections.reporting, locals())

    def framework(self, framework: str | None = NotProvided) -> AlgorithmConfig:
        """RLlib's deep-learning framework choice: offline-rl's learners are torch only, so
        ``"torch"`` (or ``None``, which RLlib reads as unchanged) keeps it and any other is a
        ``ConfigError``."""
        if framework is NotProvided or framework is None:
            return self
        return self.update_from_dict({"framework": framework})

    def checkpointing(self, *, checkpoint_frequency: int = NotProvided,
                      keep_checkpoints_num: int | None = NotProvided) -> AlgorithmConfig:
        """Checkpoints written while ``offline-rl train`` runs, so that a stopped run keeps its
        progress: ``checkpoint_<iteration>`` every ``checkpoint_frequency`` iterations (0: only
        the final ``checkpoint``), of which the newest ``keep_checkpoints_num`` stay (``None``:
        all). ``PeriodicCheckpoints`` does the same in a training loop of your own."""
        return self._set(self.sections.checkpointing, locals())

    def rl_module(self, *, model_config: dict[str, Any] | DefaultModelConfig = NotProvided,
                  rl_module_spec: RLModuleSpec | MultiRLModuleSpec | None = NotProvided,
                  model_config_dict: dict[str, Any] = NotProvided) -> AlgorithmConfig:
        """The policy network: ``model_config`` keys (``fcnet_hiddens``, ``fcnet_activation``,
        ...) for the default module, or a full ``RLModuleSpec``. The keys given replace
        those set before; the others, such as an algorithm's defaults, stay. A multi-agent
        config may give each module of ``multi_agent(policies=...)`` its own spec, with its
        spaces (no env needed): ``MultiRLModuleSpec(rl_module_specs={module_id: spec})``.

        Examples:
            >>> from offline_rl import TD3BCConfig
            >>> TD3BCConfig().rl_module(model_config={"fcnet_hiddens": [64]}).model_config
            {'fcnet_hiddens': [64], 'fcnet_activation': 'relu', 'bound_mean': True}

        A ``DefaultModelConfig`` gives the fields it sets away from the class's defaults
        (``DefaultModelConfig(fcnet_hiddens=[64])`` keeps an algorithm's activation); a dict
        gives every key it names. ``model_config_dict`` is RLlib's older name of
        ``model_config`` (give one of them).
        """
        if model_config_dict is not NotProvided:
            if model_config is not NotProvided:
                raise ConfigError("rl_module(model_config_dict=...) is RLlib's older name of "
                                  "model_config: give one of them")
            model_config = model_config_dict
        if isinstance(model_config, DefaultModelConfig):
            model_config = model_config.changed()
        if model_config is not NotProvided:
            model_config = {**self.sections.rl_module.model_config, **model_config}
        return self._set(self.sections.rl_module, locals())

    def multi_agent(self, *, policies: Collection[str] | Mapping[str, Any] | None = NotProvided,
                    policy_mapping_fn: Callable[..., str] | Mapping[Any, str] | None
                    = NotProvided,
                    policies_to_train: Collection[str] | None = NotProvided) -> AlgorithmConfig:
        """Several modules, one per kind of agent (RLlib's names): ``policies`` (their ids; a
        dict's keys, as RLlib's ``{id: PolicySpec}``), ``policy_mapping_fn`` (RLlib's
        ``(agent_id, episode, **kwargs) -> module_id``, or a dict ``{agent_id: module_id}``)
        and ``policies_to_train`` (default: all). Each trained module learns, as its own
        algorithm, from the rows of the agents mapped to it (independent learners).

        Examples:
            >>> from offline_rl import BCConfig
            >>> config = BCConfig().multi_agent(policies={"left", "right"},
            ...                                 policy_mapping_fn={"a0": "left", "a1": "right"})
            >>> config.sections.multi_agent.policies
            ['left', 'right']
        """
        policies, policies_to_train = (
            sorted(ids) if isinstance(ids, AbstractSet) else
            list(ids) if isinstance(ids, Mapping | list | tuple) else ids
            for ids in (policies, policies_to_train))
        if isinstance(policy_mapping_fn, Mapping):
            policy_mapping_fn = dict(policy_mapping_fn)
        return self._set(self.sections.multi_agent, locals())

    def debugging(self, *, seed: int | None = NotProvided) -> AlgorithmConfig:
        """Seeds torch, data shuffling and evaluation episodes for reproducible runs."""
        return self._set(self.sections.debugging, locals())

    @classmethod
    def overrides(cls, **kwargs: Any) -> dict[str, Any]:
        """``kwargs`` as a dict, for ``evaluation(evaluation_config=...)`` (RLlib's
        ``AlgorithmConfig.overrides``), once each key is checked to be an option of this
        config or an old-stack key (``ConfigError`` naming the others).

        Examples:
            >>> from offline_rl import BCConfig
            >>> BCConfig.overrides(input_="data/held-out", explore=False)
            {'input_': 'data/held-out', 'explore': False}
        """
        unknown = unknown_keys(kwargs, cls())
        if unknown:
            raise ConfigError(f"{cls.__name__}.overrides(): {unknown} are not options of "
                              f"{cls.__name__} (nor RLlib old-stack keys); see "
                              f"{cls.__name__}().to_dict() for the options")
        return dict(kwargs)

    def _set(self, section: Section, arguments: dict[str, Any]) -> AlgorithmConfig:
        """Sets each of ``section``'s fields that a builder was given (its ``locals()``: every
        field has a keyword of its name, which ``test_config`` checks)."""
        for name in section.option_names():
            if arguments[name] is not NotProvided:
                setattr(section, name, arguments[name])
        return self

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
            agent_ids=sections.multi_agent.agent_ids())

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


def per_learner_batch_size(train_batch_size: Any, num_learners: int) -> int:
    """Each learner's rows of RLlib's total ``train_batch_size`` over ``num_learners`` (0:
    one local learner); ``ConfigError`` unless that is an int >= 1.

    Examples:
        >>> per_learner_batch_size(2000, 0), per_learner_batch_size(2000, 4)
        (2000, 500)
    """
    learners = max(num_learners, 1) if is_int_at_least(num_learners, 0) else 1
    if not is_int_at_least(train_batch_size, learners):
        raise ConfigError(f"training(train_batch_size={train_batch_size!r}): must be an int "
                          f">= {learners}, the rows of one update over the {learners} "
                          "learner(s) configured (or give train_batch_size_per_learner)")
    return train_batch_size // learners


def _as_class(value: type | str | None) -> type | None:
    return import_object(value) if isinstance(value, str) else value
