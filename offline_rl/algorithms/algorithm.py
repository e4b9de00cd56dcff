"""``Algorithm``: data stream + learner + evaluator built from a config; ``train()`` iterates."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from offline_rl.algorithms import checkpoint
from offline_rl.algorithms.algorithm_lifecycle import AlgorithmLifecycle
from offline_rl.algorithms.env_evaluation_rounds import EnvEvaluationRounds, recording_config
from offline_rl.algorithms.module_statistics import with_observation_statistics
from offline_rl.algorithms.ray_start import start_ray
from offline_rl.algorithms.train_results import data_figures, learner_results, merged_rounds
from offline_rl.data.pipeline.mixed_data import open_offline_data
from offline_rl.data.pipeline.training_data import TrainingData
from offline_rl.errors import ConfigError, name_iteration, surface_errors
from offline_rl.evaluation.env_limits import check_env_spaces
from offline_rl.models.multi_rl_module import MultiRLModule
from offline_rl.names import (
    COMPONENT_LEARNER,
    COMPONENT_LEARNER_GROUP,
    COMPONENT_RL_MODULE,
    DEFAULT_MODULE_ID,
    ENV_RUNNER_RESULTS,
    EVALUATION_RESULTS,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_TRAINING_STEP_CALLS_PER_ITERATION,
    OFF_POLICY_ESTIMATION,
    OFFLINE_EVAL_RUNNER_RESULTS,
    TIMERS,
    TRAINING_ITERATION,
    TRAINING_ITERATION_TIMER,
    TRAINING_STEP_TIMER,
)
from offline_rl.recording.recorder import check_output, checked_env_runner_cpus
from offline_rl.settings.resource_plan import ResourcePlan

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig
    from offline_rl.algorithms.held_out_losses import HeldOutLosses
    from offline_rl.algorithms.off_policy_evaluation import OffPolicyEvaluation
    from offline_rl.algorithms.offline_evaluation_runner_group import (
        OfflineEvaluationRunnerGroup,
    )
    from offline_rl.algorithms.online_training import OnlineTraining
    from offline_rl.core.learner_group import LearnerGroup
    from offline_rl.evaluation.off_policy.policy import Policy

#: What ``restore_from_path(component=...)`` loads (``None``: the whole checkpoint).
RESTORABLE_COMPONENTS = (None, COMPONENT_LEARNER_GROUP, COMPONENT_LEARNER, COMPONENT_RL_MODULE,
                         f"{COMPONENT_RL_MODULE}/{DEFAULT_MODULE_ID}",
                         *("/".join(checkpoint.COMPONENT_PATH[:depth]) for depth in (2, 3, 4)))
#: The torch side (learners, torch evaluation), imported while Ray starts: neither waits.
TORCH_MODULES = ("offline_rl.core.learner_group", "offline_rl.core.random_states",
                 "offline_rl.algorithms.held_out_losses",
                 "offline_rl.algorithms.offline_evaluation_runner_group",
                 "offline_rl.algorithms.off_policy_evaluation",
                 "offline_rl.evaluation.evaluation_runners")


class Algorithm(AlgorithmLifecycle):
    """Trains a policy from offline data.

    Building builds the evaluation env, checks the input data (before any Ray work, so that
    common mistakes fail within a second), starts or joins Ray, then builds the
    ``LearnerGroup``, which starts Ray Data (in the background for a local learner) and the
    learners. ``train()`` runs one iteration of ``dataset_num_iters_per_learner`` updates per
    learner (``None``: one epoch of each learner's data) and returns RLlib-shaped results;
    every ``evaluation_interval`` iterations it also evaluates the greedy policy in the env.

    Examples:
        >>> from offline_rl import BCConfig
        >>> config = (BCConfig().environment("CartPole-v1")
        ...           .training(train_batch_size_per_learner=256)
        ...           .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=10)
        ...           .evaluation(evaluation_duration=2))
        >>> with config.build() as algo:
        ...     result = algo.train()
        ...     evaluation = algo.evaluate()["env_runners"]
        >>> result["learners"]["__all_modules__"]["num_env_steps_trained"]
        2560
        >>> evaluation["num_episodes"], evaluation["episode_return_mean"] > 0
        (2, True)
    """

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        """A new config of this algorithm (``BC.get_default_config()`` is a ``BCConfig()``),
        as in RLlib: the config class registered under the class's name (``AlgorithmConfig``
        for ``Algorithm`` itself)."""
        from offline_rl.algorithms.algorithm_config import AlgorithmConfig
        from offline_rl.algorithms.registry import get_algorithm_config_class

        if cls is Algorithm:
            return AlgorithmConfig()
        return get_algorithm_config_class(cls.__name__)()

    def __init__(self, config: AlgorithmConfig):
        #: What ``evaluate()`` plays in the env (``None`` without an env).
        self.env_evaluation: EnvEvaluationRounds | None = None
        self.off_policy_evaluation: OffPolicyEvaluation | None = None
        self.held_out_losses: HeldOutLosses | None = None
        self.offline_eval_runner_group: OfflineEvaluationRunnerGroup | None = None
        self.offline_data: TrainingData | None = None
        self.learner_group: LearnerGroup | None = None
        self.online: OnlineTraining | None = None  # the "sampler" of input_
        super().__init__(config)

    def _build(self) -> None:
        sections = self.config.sections
        environment, evaluation = sections.environment, sections.evaluation
        if environment.env is not None:
            self.env_evaluation = EnvEvaluationRounds(self.config)
            check_env_spaces(self.env_evaluation.evaluator.envs[0],
                             self.config.given_module_spaces())
        spaces = self.observation_space, self.action_space = self._spaces()
        output = sections.offline_data.output
        if output:
            check_output(recording_config(self.config), input_=sections.offline_data.input_,
                         evaluation_input=sections.evaluation.evaluation_config.get("input_"))
        offline_data_class = self.config.resolved_offline_data_class()
        if offline_data_class is None:
            # Checks the input (files, columns, the first rows) before any Ray work.
            self.offline_data = open_offline_data(self.config.data_config(spaces), spaces)
            self._started_ray = start_ray(import_meanwhile=TORCH_MODULES)
        else:  # a custom class may use Ray as it is built
            self._started_ray = start_ray(import_meanwhile=TORCH_MODULES)
            self.offline_data = offline_data_class(self.config.data_config(spaces), spaces)
        self.resources = ResourcePlan.of(sections)  # every part of the run, sized once
        if self.resources.recorder_runners.count:  # fail now, not at the first evaluate()
            checked_env_runner_cpus(recording_config(self.config),
                                    self.resources.recorder_runners.cpus)
        # Imported by start_ray, while Ray started (and so not at the top of this module).
        from offline_rl.algorithms.held_out_losses import HeldOutLosses
        from offline_rl.algorithms.off_policy_evaluation import OffPolicyEvaluation
        from offline_rl.algorithms.offline_evaluation_runner_group import (
            OfflineEvaluationRunnerGroup,
        )
        from offline_rl.algorithms.online_training import OnlineTraining
        from offline_rl.core.learner_group import LearnerGroup

        # Held-out data is read before the learners' stream takes the CPUs.
        if evaluation.off_policy_estimation_methods:
            self.off_policy_evaluation = OffPolicyEvaluation(self.config, spaces)
        if evaluation.offline_eval_input_:
            self.held_out_losses = HeldOutLosses(self.config, spaces, self.offline_data)
        spec = with_observation_statistics(self.config, self.config.get_rl_module_spec(*spaces),
                                           self.offline_data)
        if self.env_evaluation is not None:
            self.env_evaluation.evaluator.adapt_to(spec.observation_space, spec.action_space)
        self.learner_group = LearnerGroup(self.config.learner_config(spec), self.offline_data,
                                          resources=self.resources)
        if spec.load_state_path is not None:
            self._load_module_state(spec.load_state_path)
        if evaluation.evaluates_training_input():
            self.offline_eval_runner_group = OfflineEvaluationRunnerGroup(
                self.config, local_runner=not evaluation.num_offline_eval_runners,
                module_spec=spec, runner_cpus=self.resources.offline_eval_runners.cpus)
        self.online = OnlineTraining.build(self.config, self.learner_group, self.offline_data,
                                           spec)
        if self.resources.evaluation_runners.count:
            self.env_evaluation.start_runners(spec, self.resources.evaluation_runners)

    def _load_module_state(self, path: str | Path) -> None:
        """The module weights of the checkpoint at ``path`` (``RLModuleSpec.load_state_path``:
        a checkpoint folder or RLlib's path of its module)."""
        named = checkpoint.component_of(path)[1] or COMPONENT_RL_MODULE
        if named.split("/")[-1] not in (COMPONENT_RL_MODULE, DEFAULT_MODULE_ID):
            raise ConfigError(f"RLModuleSpec(load_state_path={str(path)!r}) is the checkpoint's "
                              f"{named}; give the checkpoint folder or its "
                              f"{'/'.join(checkpoint.COMPONENT_PATH[:3])}")
        self.restore_from_path(path, component=named)

    def _spaces(self) -> tuple[gym.Space, gym.Space]:
        environment = self.config.sections.environment
        evaluator = None if self.env_evaluation is None else self.env_evaluation.evaluator
        return (environment.observation_space or getattr(evaluator, "observation_space", None),
                environment.action_space or getattr(evaluator, "action_space", None))

    @property
    def num_updates_lifetime(self) -> int:
        """Optimizer steps taken so far (all learners take the same ones)."""
        return self.learner_group.num_steps

    @property
    def module(self) -> Any:
        """The trained torch policy module (learner 0's weights with remote learners)."""
        return self.learner_group.module

    def get_module(self, module_id: str = DEFAULT_MODULE_ID) -> Any:
        """RLlib's ``get_module``: the trained module of ``module_id`` (there is one)."""
        return MultiRLModule({DEFAULT_MODULE_ID: self.module})[module_id]

    def get_policy(self, policy_id: str = DEFAULT_MODULE_ID) -> Policy:
        """RLlib's ``Policy`` of the trained module (which off-policy estimators take)."""
        from offline_rl.evaluation.off_policy.policy import Policy
        return Policy(self.get_module(policy_id))

    @surface_errors
    def train(self) -> dict[str, Any]:
        """One training iteration; evaluates too when ``evaluation_interval`` says so.

        ``result["learners"]["default_policy"]`` holds the loss metrics averaged over the
        learners, ``["__all_modules__"]`` the step counts, ``["per_learner"]`` each learner's
        planned and done updates; ``result["data"]`` the data stream's figures (per learner
        too), dropped data, the staleness of the module's weights when connectors use it, the
        rows of each mixed source (``"sources"``) and what Ray Data reports of the pipeline
        (``OfflineData.pipeline_stats``: rows, time, backpressure per operator, PreLearners)."""
        started = time.perf_counter()
        interval = self.config.sections.evaluation.evaluation_interval
        evaluate_now = bool(interval) and (self.iteration + 1) % interval == 0
        parallel = (evaluate_now and self.env_evaluation is not None
                    and self.env_evaluation.runners is not None
                    and self.config.sections.evaluation.evaluation_parallel_to_training)
        # In parallel, the runners play the weights from before this iteration's updates.
        pending = self.env_evaluation.start(self.module) if parallel else None
        sampled = None if self.online is None else self.online.before_update()
        try:
            with self.offline_data.naming_damaged_files():
                rounds, updating_s = self._update_rounds(started)
        except Exception as error:
            raise name_iteration(error, self.iteration + 1)  # noqa: B904 (it is the error)
        per_learner = merged_rounds(rounds)
        steps = sum(learner["num_module_steps_trained"] for learner in per_learner)
        self.iteration += 1
        self.num_env_steps_trained_lifetime += steps
        elapsed = time.perf_counter() - started
        self._train_time_s += elapsed
        result: dict[str, Any] = {
            TRAINING_ITERATION: self.iteration,
            NUM_ENV_STEPS_SAMPLED_LIFETIME: self.num_env_steps_trained_lifetime,
            NUM_TRAINING_STEP_CALLS_PER_ITERATION: len(rounds),
            TIMERS: {TRAINING_ITERATION_TIMER: elapsed,
                     TRAINING_STEP_TIMER: updating_s / len(rounds)},
            LEARNER_RESULTS: learner_results(
                per_learner, lifetime_steps=self.num_env_steps_trained_lifetime,
                train_time_s=self._train_time_s, num_updates_lifetime=self.num_updates_lifetime),
            "data": {**data_figures(per_learner, self.offline_data.counts()),
                     **self.offline_data.pipeline_stats(),
                     "prelearner_pool": self.offline_data.pool()},
            "time_this_iter_s": elapsed,
            "time_total_s": self._train_time_s,
        }
        if sampled is not None:
            result[ENV_RUNNER_RESULTS] = sampled
        if evaluate_now:
            result[EVALUATION_RESULTS] = self._evaluation(pending)
        offline_interval = self.config.sections.evaluation.offline_evaluation_interval
        if offline_interval and self.iteration % offline_interval == 0:
            result.setdefault(EVALUATION_RESULTS, {}).update(self.evaluate_offline())
        return result

    def _update_rounds(self, started: float) -> tuple[list[list[dict[str, Any]]], float]:
        """Rounds of ``dataset_num_iters_per_learner`` updates (each learner's figures per
        round; RLlib's ``training_step`` calls): one, or as many as ``reporting()``'s minimum
        time and rows ask for; and the seconds they took."""
        reporting = self.config.sections.reporting
        rounds: list[list[dict[str, Any]]] = []
        rows, updating_s = 0, 0.0
        while True:
            round_started = time.perf_counter()
            rounds.append(self.learner_group.train())
            updating_s += time.perf_counter() - round_started
            trained = sum(learner["num_module_steps_trained"] for learner in rounds[-1])
            rows += trained
            if not reporting.repeats_updates() or not trained:  # no data left to train on
                return rounds, updating_s
            if (time.perf_counter() - started >= (reporting.min_time_s_per_iteration or 0)
                    and rows >= (reporting.min_train_timesteps_per_iteration or 0)
                    and rows >= (reporting.min_sample_timesteps_per_iteration or 0)):
                return rounds, updating_s

    @surface_errors
    def evaluate_offline(self) -> dict[str, Any]:
        """The learner's loss metrics, without a step, under RLlib's key
        ``OFFLINE_EVAL_RUNNER_RESULTS``: on all of ``offline_eval_input_`` (``{"default_policy":
        {...}, "num_env_steps": rows}``), else, as in RLlib, on
        ``offline_eval_runner_group``'s batches of the training input (``OfflineEvaluationRunner
        .run()``'s figures, the runners' merged)."""
        if self.held_out_losses is not None:
            results = self.held_out_losses.evaluate(self.learner_group)
        elif self.offline_eval_runner_group is not None:
            self.offline_eval_runner_group.sync_weights(self.learner_group)
            results = self.offline_eval_runner_group.run()
        else:
            raise ConfigError("evaluate_offline() needs config.evaluation("
                              "offline_evaluation_interval=N) (the loss on the training input, "
                              "as in RLlib) or offline_eval_input_=path (on held-out data)")
        return {OFFLINE_EVAL_RUNNER_RESULTS: results}

    @surface_errors
    def evaluate(self) -> dict[str, Any]:
        """Runs ``evaluation_duration`` greedy episodes in the env (across the
        ``evaluation_num_env_runners`` actors, when set). With ``offline_data(output=...)``
        the episodes are instead played by env runner actors (``evaluation_num_env_runners``,
        else ``num_env_runners``), sampling the policy, and recorded to ``output``. With
        ``off_policy_estimation_methods``, ``["off_policy_estimation"]`` holds their estimates
        on the held-out data."""
        return self._evaluation(None)

    def _evaluation(self, pending: tuple[float, Any] | None) -> dict[str, Any]:
        env = self.env_evaluation
        if env is None and self.off_policy_evaluation is None:
            raise ConfigError("evaluate() needs an env (config.environment(env=...)) or "
                              "off_policy_estimation_methods with held-out data")
        result: dict[str, Any] = {}
        if env is not None and env.records:
            result = env.record(self.module, self.resources.recorder_runners)
        elif env is not None:
            result = env.finish(self.module, *(pending or env.start(self.module)))
        if self.off_policy_evaluation is not None:
            result[OFF_POLICY_ESTIMATION] = self.off_policy_evaluation.estimate(self.module)
        return result

    def save_to_path(self, path: str | Path) -> str:
        """Writes a checkpoint folder (weights, optimizer, config, counters); returns its path."""
        from offline_rl.core.random_states import random_states  # imported by start_ray

        config = self.config.copy().environment(observation_space=self.observation_space,
                                                action_space=self.action_space)
        state = {
            "algorithm": config.algo_name,
            "training_iteration": self.iteration,
            "num_env_steps_trained_lifetime": self.num_env_steps_trained_lifetime,
            "num_updates_lifetime": self.num_updates_lifetime,
            "data_position": self.learner_group.data_position(),
            "rng_states": random_states(),
            "online": None if self.online is None else self.online.state(),
        }
        return str(checkpoint.write_checkpoint(path, self.learner_group, config, state))

    @surface_errors
    def restore_from_path(self, path: str | Path, *, component: str | None = None) -> None:
        """Loads a checkpoint folder: everything (weights, optimizer state, counters, random
        number generators and where each learner's data stream stood), or
        only one of RLlib's components: ``COMPONENT_LEARNER_GROUP``/``COMPONENT_LEARNER``
        (weights and optimizer state) or ``COMPONENT_RL_MODULE`` (the module's weights, e.g. an
        expert's, to record with); the counters then stay as they are. As in RLlib, ``path``
        may be the component's path inside the checkpoint, with ``component`` its path
        (``restore_from_path(f"{ckpt}/learner_group/learner/rl_module",
        component="learner_group/learner/rl_module")``)."""
        if component not in RESTORABLE_COMPONENTS:
            raise ConfigError(f"component={component!r} is not a part of offline-rl's "
                              f"checkpoints; use one of {RESTORABLE_COMPONENTS}")
        given = path
        path, named = checkpoint.component_of(path)
        if named is not None and component is None:
            component = named
        elif named is not None and named.split("/")[-1] != component.split("/")[-1]:
            raise ConfigError(f"{given} is the checkpoint's {named}, not its {component}: "
                              f"restore it with component={named!r}, or give the checkpoint "
                              f"folder {path}")
        state = checkpoint.read_algorithm_state(path)
        module_only = component is not None and component.split("/")[-1] in (
            COMPONENT_RL_MODULE, DEFAULT_MODULE_ID)
        other = checkpoint.other_algorithm(path, state, self.config.algo_name)
        if other and not module_only:
            raise ConfigError(other)
        try:
            self.learner_group.load_state(
                checkpoint.learner_state_file(path),
                state["num_updates_lifetime"] if component is None else None,
                module_only=module_only)
        except ConfigError as error:
            raise (ConfigError(f"{other} ({error.message})") if other else error) from None
        if component is None:
            self.iteration = state["training_iteration"]
            self.num_env_steps_trained_lifetime = state["num_env_steps_trained_lifetime"]
            if state.get("data_position"):
                self.learner_group.resume_data(state["data_position"])
            if state.get("online") and self.online is not None:
                self.online.set_state(state["online"])
            if state.get("rng_states"):
                checkpoint.restore_random_states(path, state["rng_states"])

    def stop(self) -> None:
        """Stops the recorder (flushing what it buffers), the learners, the data stream and
        envs, and Ray if this algorithm started it. The recorder goes first: its actors' CPUs
        may be what the data stream waits for to finish its current pass."""
        if self.env_evaluation is not None:
            self.env_evaluation.stop_actors()
        if self.online is not None:
            self.online.stop()
            self.online = None
        if self.offline_eval_runner_group is not None:
            self.offline_eval_runner_group.stop()
            self.offline_eval_runner_group = None
        if self.learner_group is not None:
            self.learner_group.stop()
            self.learner_group = None
        if self.offline_data is not None:
            self.offline_data.stop()
        if self.env_evaluation is not None:
            self.env_evaluation.close()
        super().stop()

