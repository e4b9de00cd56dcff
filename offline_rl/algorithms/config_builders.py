"""The builder methods of ``AlgorithmConfig``, RLlib's: each sets the options it is given in
its section of ``config.sections`` and returns the config, so that calls chain."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import gymnasium as gym

from offline_rl.algorithms.config_files import update_config
from offline_rl.algorithms.flat_config import evaluation_overrides, unknown_keys
from offline_rl.errors import ConfigError
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.multi_rl_module import MultiRLModuleSpec
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.settings.flat_access import FlatAccess
from offline_rl.settings.learning_rates import LearningRate
from offline_rl.settings.options import NotProvided, Section, is_int_at_least
from offline_rl.settings.sections import ConfigSections

C = TypeVar("C", bound="ConfigBuilders")


class ConfigBuilders(FlatAccess):
    """RLlib's builder methods over ``sections`` (``AlgorithmConfig`` is the class to use)."""

    sections: ConfigSections

    def environment(self: C, env: str | Callable[[dict], gym.Env] | None = NotProvided, *,
                    env_config: dict[str, Any] = NotProvided,
                    observation_space: gym.Space | None = NotProvided,
                    action_space: gym.Space | None = NotProvided,
                    normalize_actions: bool = NotProvided,
                    clip_actions: bool = NotProvided) -> C:
        """The env used for evaluation (a gymnasium id or a creator ``env_config -> env``) and/or
        the spaces, which may be given without any env to train from data alone.
        ``normalize_actions=True``: the module acts in [-1, 1] on a ``Box`` (as RLlib's
        recorded actions are), unsquashed onto the env's bounds in the env;
        ``clip_actions=True``: actions are clipped before the env takes them."""
        return self._set(self.sections.environment, locals())

    def training(self: C, *, lr: LearningRate = NotProvided,
                 train_batch_size_per_learner: int = NotProvided,
                 train_batch_size: int = NotProvided,
                 grad_clip: float | None = NotProvided, grad_clip_by: str = NotProvided,
                 learner_connector: Callable[..., Any] | str | None = NotProvided,
                 add_default_connectors_to_learner_pipeline: bool = NotProvided,
                 training_intensity: float | None = NotProvided) -> C:
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

    def learners(self: C, *, num_learners: int = NotProvided,
                 num_gpus_per_learner: float = NotProvided,
                 num_cpus_per_learner: float | str = NotProvided,
                 placement_strategy: str = NotProvided) -> C:
        """How many learners and what each gets. ``num_learners=0``: one learner in this
        process; ``N >= 1``: N Ray actors, each training on its own ``streaming_split`` shard,
        gradients averaged with ``torch.distributed``. ``num_cpus_per_learner="auto"``: 0 with a
        GPU, else 1 CPU when that fits beside the data pipeline, else 0. Learners are placed
        with a placement group (``"PACK"``, ``"SPREAD"``, ``"STRICT_PACK"``,
        ``"STRICT_SPREAD"``)."""
        return self._set(self.sections.learners, locals())

    def api_stack(self: C, enable_rl_module_and_learner: bool | None = NotProvided,
                  enable_env_runner_and_connector_v2: bool | None = NotProvided
                  ) -> C:
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

    def resources(self: C, *, num_cpus_for_main_process: float | str = NotProvided
                  ) -> C:
        """CPUs the algorithm's own process reserves as a Ray Tune trial ("auto": see trainable)."""
        return self._set(self.sections.resources, locals())

    def env_runners(self: C, *, num_env_runners: int = NotProvided,
                    num_envs_per_env_runner: int = NotProvided,
                    num_cpus_per_env_runner: float | str = NotProvided,
                    batch_mode: str = NotProvided,
                    rollout_fragment_length: int | str = NotProvided,
                    max_episode_steps: int | None = NotProvided,
                    sample_timeout_s: float | None = NotProvided) -> C:
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

    def offline_data(self: C, *, input_: str | list[str] | Callable[..., Any] = NotProvided,
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
                     shuffle_buffer_size: int = NotProvided) -> C:
        """Where the data is and how it is read, mapped, iterated and written, with RLlib's
        Input/Output API names and a few of offline-rl's own (what to do with non-finite or
        out-of-bounds values); each option is documented on ``OfflineDataConfig``. ``input_``
        and ``output`` may also be creators of ``InputReader``s and ``OutputWriter``s (RLlib's
        old stack; see ``offline_rl.data.source.custom_input``). RLlib's old-stack keywords
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

    def evaluation(self: C, *, evaluation_interval: int | None = NotProvided,
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
                   ) -> C:
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

    def reporting(self: C, *, min_time_s_per_iteration: float | None = NotProvided,
                  min_train_timesteps_per_iteration: int | None = NotProvided,
                  min_sample_timesteps_per_iteration: int | None = NotProvided,
                  metrics_num_episodes_for_smoothing: int | None = NotProvided,
                  keep_per_episode_custom_metrics: bool = NotProvided,
                  metrics_episode_collection_timeout_s: float = NotProvided,
                  log_gradients: bool = NotProvided,
                  custom_stats_cls_lookup: dict[str, type] = NotProvided) -> C:
        """RLlib's reporting settings: each ``train()`` repeats its round of updates until
        ``min_time_s_per_iteration`` seconds, ``min_train_timesteps_per_iteration`` rows
        trained and ``min_sample_timesteps_per_iteration`` rows read have passed;
        ``metrics_num_episodes_for_smoothing`` averages the evaluation's return over the last
        N episodes. The others are RLlib's metrics machinery: their defaults are taken, other
        values refused (see ``ReportingConfig``)."""
        return self._set(self.sections.reporting, locals())

    def framework(self: C, framework: str | None = NotProvided) -> C:
        """RLlib's deep-learning framework choice: offline-rl's learners are torch only, so
        ``"torch"`` (or ``None``, which RLlib reads as unchanged) keeps it and any other is a
        ``ConfigError``."""
        if framework is NotProvided or framework is None:
            return self
        return self.update_from_dict({"framework": framework})

    def checkpointing(self: C, *, checkpoint_frequency: int = NotProvided,
                      keep_checkpoints_num: int | None = NotProvided) -> C:
        """Checkpoints written while ``offline-rl train`` runs, so that a stopped run keeps its
        progress: ``checkpoint_<iteration>`` every ``checkpoint_frequency`` iterations (0: only
        the final ``checkpoint``), of which the newest ``keep_checkpoints_num`` stay (``None``:
        all). ``PeriodicCheckpoints`` does the same in a training loop of your own."""
        return self._set(self.sections.checkpointing, locals())

    def rl_module(self: C, *, model_config: dict[str, Any] | DefaultModelConfig = NotProvided,
                  rl_module_spec: RLModuleSpec | MultiRLModuleSpec | None = NotProvided,
                  model_config_dict: dict[str, Any] = NotProvided) -> C:
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

    def multi_agent(self: C, *, policies: Collection[str] | Mapping[str, Any] | None = NotProvided,
                    policy_mapping_fn: Callable[..., str] | Mapping[Any, str] | None
                    = NotProvided,
                    policies_to_train: Collection[str] | None = NotProvided) -> C:
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

    def debugging(self: C, *, seed: int | None = NotProvided) -> C:
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

    def _set(self: C, section: Section, arguments: dict[str, Any]) -> C:
        """Sets each of ``section``'s fields that a builder was given (its ``locals()``: every
        field has a keyword of its name, which ``test_config`` checks)."""
        for name in section.option_names():
            if arguments[name] is not NotProvided:
                setattr(section, name, arguments[name])
        return self


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
