"""``MultiAgentAlgorithm``: the modules of a multi-agent config trained side by side, each on
the rows of the agents mapped to it (independent learners), and evaluated together in the
multi-agent env."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline_rl.algorithms import checkpoint
from offline_rl.algorithms.algorithm import TORCH_MODULES, Algorithm
from offline_rl.algorithms.algorithm_lifecycle import AlgorithmLifecycle
from offline_rl.algorithms.env_evaluation_rounds import MAX_EVALUATION_ENVS
from offline_rl.algorithms.module_mapping import (
    Spaces,
    agent_mapping,
    module_spaces,
    routed_by_module_column,
)
from offline_rl.algorithms.ray_start import start_ray
from offline_rl.data.pipeline.resources import side_by_side_options
from offline_rl.data.source.data_config import DataConfig
from offline_rl.data.source.input_agents import input_agent_modules, input_agents, input_policy_ids
from offline_rl.errors import ConfigError, DataFormatError, find_error, surface_errors, surfaced
from offline_rl.evaluation.env_limits import EpisodeLimits, evaluation_limits
from offline_rl.evaluation.multi_agent_env import make_multi_agent_env
from offline_rl.evaluation.multi_agent_rollout import (
    multi_agent_episode_statistics,
    multi_agent_rollout,
)
from offline_rl.models.multi_rl_module import MultiRLModule, module_spec_of
from offline_rl.names import (
    ALL_MODULES,
    DEFAULT_MODULE_ID,
    ENV_RUNNER_RESULTS,
    EVALUATION_RESULTS,
    LEARNER_RESULTS,
    OFF_POLICY_ESTIMATION,
    OFFLINE_EVAL_RUNNER_RESULTS,
)
from offline_rl.recording.output_folder import new_run_id
from offline_rl.recording.policies import as_batch_policy
from offline_rl.recording.recorder import check_output, runner_writer
from offline_rl.recording.writer import EpisodeWriter

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig


class MultiAgentAlgorithm(AlgorithmLifecycle):
    """Trains the modules of ``config.multi_agent(...)``: each trained module is an algorithm of
    its own (its data pipeline reads the data of the agents ``policy_mapping_fn`` maps to it:
    rows filtered as the Parquet files are read, or its agents' episodes of each multi-agent
    episode; its learners; its checkpoint folder), and one ``train()`` trains each of them one
    iteration. Evaluation plays every module in the multi-agent env (``environment(env=...)``:
    see ``make_multi_agent_env``), each acting greedily for its agents (modules not in
    ``policies_to_train`` act as they were built), records to ``output`` and runs the
    off-policy estimators per module (see ``evaluate``).

    Building reads the agent ids of the input first (one column), and maps each, and
    the env's agents, to its module: an agent mapped to a module ``policies`` does not name,
    or a trained module without rows, is a ``ConfigError`` naming them. Modules take their
    spaces from the env's agents (the agents of a module must agree), else from
    ``environment(observation_space=..., action_space=...)``.

    ``result["learners"][module_id]`` holds each module's loss metrics,
    ``["__all_modules__"]`` the steps of all; ``result["data"][module_id]`` each pipeline's
    figures; evaluation reports RLlib's ``episode_return_mean`` (of the agents' returns
    summed), ``agent_episode_returns_mean`` and ``module_episode_returns_mean``.
    """

    def __init__(self, config: AlgorithmConfig):
        self.algorithms: dict[str, Algorithm] = {}
        self.envs: list[Any] = []
        self._untrained = MultiRLModule({})
        #: The writer of ``output``, which evaluation episodes are recorded to (if set).
        self.writer: EpisodeWriter | None = None
        super().__init__(config)

    def _build(self) -> None:
        sections = self.config.sections
        multi_agent, environment = sections.multi_agent, sections.environment
        if environment.env is not None:
            count = min(sections.evaluation.evaluation_duration, MAX_EVALUATION_ENVS)
            self.envs = [make_multi_agent_env(environment.env, environment.env_config)
                         for _ in range(count)]
        env_agents = list(self.envs[0].possible_agents) if self.envs else []
        # MultiAgentBatch lines name modules (policies), not agents; rows name their agents.
        policy_batches = sections.offline_data.input_read_sample_batches
        data_config = DataConfig(sections.offline_data)
        if multi_agent.policy_mapping_fn is None and len(multi_agent.policies) > 1 \
                and not sections.offline_data.reads_episodes:
            # RLlib's writer names each row's module: rows go to the module they name.
            self.config.multi_agent(policy_mapping_fn=routed_by_module_column(
                input_agent_modules(data_config), multi_agent.policies))
        data_agents = [] if policy_batches else input_agents(data_config)
        # The data names agents as text; the env's own ids (ints, say) are what a mapping
        # function is written for.
        env_ids = {str(agent): agent for agent in env_agents}
        data_agents = [env_ids.get(agent, agent) for agent in data_agents]
        self.mapping = agent_mapping(multi_agent, [*env_agents, *data_agents])
        idle = [module for module in multi_agent.trained_modules
                if not any(self.mapping[agent] == module for agent in data_agents)]
        if idle and not policy_batches:
            raise ConfigError(f"the modules {idle} are to be trained, but no row of the input "
                              f"is theirs: its agents {data_agents} map to "
                              f"{sorted(set(map(self.mapping.get, data_agents)))}; map agents "
                              "to them, or leave them out of policies_to_train")
        if policy_batches:
            found = input_policy_ids(data_config)
            idle = [module for module in multi_agent.trained_modules if module not in found]
            if idle and found:  # no policy ids: the PreLearners name the lines
                raise ConfigError(
                    f"the modules {idle} are to be trained, but no MultiAgentBatch line of the "
                    f"input holds their policy id: the lines' policy ids are {found}, the "
                    f"configured policies {multi_agent.policies}. The policy ids are the "
                    "module ids: name the modules after them (config.multi_agent(policies="
                    f"{found})), or leave the others out of policies_to_train")
        spaces = module_spaces(multi_agent.policies, self.mapping, self.envs[:1],
                               (environment.observation_space, environment.action_space),
                               sections.rl_module.rl_module_spec)
        if sections.offline_data.output:
            recording = self.config.recorder_config()
            check_output(recording, input_=sections.offline_data.input_,
                         evaluation_input=sections.evaluation.evaluation_config.get("input_"))
            self.writer = runner_writer(recording, 0, new_run_id(), overwrite=False)
        self._started_ray = start_ray(import_meanwhile=TORCH_MODULES)
        for module_id in multi_agent.trained_modules:
            sub_config = module_config(self.config, module_id, self.mapping, spaces[module_id])
            with self._naming_module(module_id):
                self.algorithms[module_id] = sub_config.algo_class(sub_config)
                # One pipeline maps and materializes its rows at a time: each may take every
                # CPU (streamed ones run side by side, each with its share).
                self.algorithms[module_id].learner_group.wait_for_data()
        self._untrained = MultiRLModule({
            module_id: with_module_spec(self.config, module_id).get_rl_module_spec(
                *spaces[module_id]).build()
            for module_id in multi_agent.policies if module_id not in self.algorithms})

    @contextmanager
    def _naming_module(self, module_id: str) -> Iterator[None]:
        """A ``DataFormatError`` about one module's data raised as it is, naming the module
        first, and where its spaces come from when its ``RLModuleSpec`` sets them (an
        ``environment()`` space a data error suggests does not change those)."""
        try:
            yield
        except Exception as error:
            ours = find_error(error)
            if not isinstance(ours, DataFormatError):
                raise
            spec = module_spec_of(self.config.sections.rl_module.rl_module_spec, module_id)
            origin = (" (whose spaces are those its RLModuleSpec in rl_module(rl_module_spec="
                      "...) sets: fix them there)"
                      if getattr(spec, "observation_space", None) is not None
                      or getattr(spec, "action_space", None) is not None else "")
            named = surfaced(error, ours, prefix=f"module {module_id!r}{origin}: ")
            raise named from (named.__cause__ or error)

    def get_module(self, module_id: str = DEFAULT_MODULE_ID) -> Any:
        """RLlib's ``get_module``: the module of ``module_id`` (a trained one's learner 0
        weights); an unknown id raises ``UnknownModuleError`` naming the modules."""
        if module_id in self.algorithms:
            return self.algorithms[module_id].module
        return MultiRLModule({**dict.fromkeys(self.algorithms), **self._untrained})[module_id]

    @surface_errors
    def train(self) -> dict[str, Any]:
        """One training iteration of every trained module; evaluates too when
        ``evaluation_interval`` says so."""
        started = time.perf_counter()
        results = {}
        for module_id, algorithm in self.algorithms.items():
            with self._naming_module(module_id):
                results[module_id] = algorithm.train()
        self.iteration += 1
        learners = {module_id: result[LEARNER_RESULTS] for module_id, result in results.items()}
        steps = sum(learner[ALL_MODULES]["num_env_steps_trained"] for learner in learners.values())
        self.num_env_steps_trained_lifetime += steps
        elapsed = time.perf_counter() - started
        self._train_time_s += elapsed
        result: dict[str, Any] = {
            "training_iteration": self.iteration,
            LEARNER_RESULTS: {
                **{module_id: learner[DEFAULT_MODULE_ID]
                   for module_id, learner in learners.items()},
                ALL_MODULES: {
                    "num_env_steps_trained": steps,
                    "num_env_steps_trained_lifetime": self.num_env_steps_trained_lifetime,
                    "num_env_steps_trained_lifetime_throughput":
                        self.num_env_steps_trained_lifetime / self._train_time_s,
                    "num_module_steps_trained": {
                        module_id: learner[ALL_MODULES]["num_env_steps_trained"]
                        for module_id, learner in learners.items()},
                },
            },
            "data": {module_id: module_result["data"]
                     for module_id, module_result in results.items()},
            "time_this_iter_s": elapsed,
            "time_total_s": self._train_time_s,
        }
        interval = self.config.sections.evaluation.evaluation_interval
        if interval and self.iteration % interval == 0:
            result[EVALUATION_RESULTS] = self.evaluate()
        held_out = {module_id: module_result[EVALUATION_RESULTS][OFFLINE_EVAL_RUNNER_RESULTS]
                    for module_id, module_result in results.items()
                    if OFFLINE_EVAL_RUNNER_RESULTS in module_result.get(EVALUATION_RESULTS, {})}
        if held_out:  # each module's at offline_evaluation_interval
            result.setdefault(EVALUATION_RESULTS, {})[OFFLINE_EVAL_RUNNER_RESULTS] = (
                module_held_out_losses(held_out))
        return result

    @surface_errors
    def evaluate_offline(self) -> dict[str, Any]:
        """Each trained module's loss metrics on its agents' rows (no step is taken), under
        ``OFFLINE_EVAL_RUNNER_RESULTS``: ``{module_id: {...}, "num_env_steps": {module_id:
        rows}}`` (see ``Algorithm.evaluate_offline``)."""
        return {OFFLINE_EVAL_RUNNER_RESULTS: module_held_out_losses({
            module_id: algorithm.evaluate_offline()[OFFLINE_EVAL_RUNNER_RESULTS]
            for module_id, algorithm in self.algorithms.items()})}

    @surface_errors
    def evaluate(self) -> dict[str, Any]:
        """Plays ``evaluation_duration`` episodes in the multi-agent env, every module acting
        greedily for its agents: ``{"env_runners": statistics}``. With
        ``offline_data(output=...)`` the modules sample their actions instead, and the
        episodes are recorded to ``output`` (one ``run-...`` folder per call; see
        ``EpisodeWriter``), with each action's ``action_logp`` and ``action_dist_inputs``.
        With ``off_policy_estimation_methods``, ``["off_policy_estimation"][module_id]`` holds
        each trained module's estimates on its agents' held-out data."""
        estimators = {module_id: algorithm.off_policy_evaluation
                      for module_id, algorithm in self.algorithms.items()
                      if algorithm.off_policy_evaluation is not None}
        if not self.envs and not estimators:
            raise ConfigError("evaluating plays the modules in the multi-agent env, or runs "
                              "off-policy estimators: set config.environment(env=...) to a "
                              "creator of one, or off_policy_estimation_methods")
        result: dict[str, Any] = {}
        if self.envs:
            started = time.perf_counter()
            modules = {module_id: self.get_module(module_id)
                       for module_id in self.config.sections.multi_agent.policies}
            evaluation = self.config.sections.evaluation
            result = {ENV_RUNNER_RESULTS: play_modules(
                          self.envs, modules, self.mapping, evaluation.evaluation_duration,
                          seed=self.config.sections.debugging.seed, writer=self.writer,
                          limits=evaluation_limits(self.config.sections,
                                                   "the multi-agent evaluation")),
                      "evaluation_time_s": time.perf_counter() - started}
        if estimators:
            result[OFF_POLICY_ESTIMATION] = {
                module_id: estimator.estimate(self.algorithms[module_id].module)
                for module_id, estimator in estimators.items()}
        return result

    def save_to_path(self, path: str | Path) -> str:
        """Writes a checkpoint folder: the config (``policy_mapping_fn`` as the mapping of the
        agents met so far), the counters, and each trained module's checkpoint in a folder
        named by its id; returns its path."""
        config = self.config.copy().multi_agent(policy_mapping_fn=dict(self.mapping))
        state = {"training_iteration": self.iteration,
                 "num_env_steps_trained_lifetime": self.num_env_steps_trained_lifetime,
                 "num_updates_lifetime": sum(algorithm.num_updates_lifetime
                                             for algorithm in self.algorithms.values())}
        return str(checkpoint.write_multi_agent_checkpoint(
            path, config, state, {module_id: algorithm.save_to_path
                                  for module_id, algorithm in self.algorithms.items()}))

    @surface_errors
    def restore_from_path(self, path: str | Path) -> None:
        """Loads a checkpoint folder ``save_to_path`` wrote: each trained module's checkpoint
        (weights, optimizer state, counters, where its data stream stood) and the counters."""
        state = checkpoint.read_algorithm_state(path)
        for module_id, algorithm in self.algorithms.items():
            algorithm.restore_from_path(Path(path) / module_id)
        self.iteration = state["training_iteration"]
        self.num_env_steps_trained_lifetime = state["num_env_steps_trained_lifetime"]

    def stop(self) -> None:
        """Stops every module's algorithm, closes the envs, and stops Ray if this started it."""
        for algorithm in self.algorithms.values():
            algorithm.stop()
        self.algorithms = {}
        for env in self.envs:
            env.close()
        self.envs = []
        super().stop()


def module_held_out_losses(per_module: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each module's offline evaluation (``{"default_policy": losses, "num_env_steps": rows}``,
    or the runners' ``{"default_policy": ..., "__all_modules__": counts}``) as one result:
    ``{module_id: losses, "num_env_steps": {module_id: rows}}`` (or ``"__all_modules__"``)."""
    others = {key for losses in per_module.values() for key in losses} - {DEFAULT_MODULE_ID}
    return {**{module_id: losses[DEFAULT_MODULE_ID] for module_id, losses in per_module.items()},
            **{key: {module_id: losses[key] for module_id, losses in per_module.items()}
               for key in sorted(others)}}


def module_config(config: AlgorithmConfig, module_id: str, mapping: dict[Any, str],
                  spaces: Spaces) -> AlgorithmConfig:
    """The config of one module's algorithm: ``config`` training ``module_id`` alone on its
    agents' rows (``policy_mapping_fn`` the resolved ``mapping``), with its ``spaces``, no
    env and no ``output`` (the multi-agent algorithm evaluates and records). Streamed
    pipelines (MARWIL's) run side by side, each with its share of the CPUs
    (``side_by_side_options``)."""
    sub_config = (with_module_spec(config, module_id)
                  .environment(env=None, env_config={}, observation_space=spaces[0],
                               action_space=spaces[1])
                  .evaluation(evaluation_interval=None)
                  .offline_data(output=None)
                  .multi_agent(policy_mapping_fn=dict(mapping), policies_to_train=[module_id]))
    offline_data = config.sections.offline_data
    count = len(config.sections.multi_agent.trained_modules)
    if count > 1 and not offline_data.materialize_mapped_data:
        sub_config.offline_data(**side_by_side_options(
            offline_data.map_batches_kwargs, offline_data.input_read_method_kwargs, count))
    return sub_config


def with_module_spec(config: AlgorithmConfig, module_id: str) -> AlgorithmConfig:
    """A copy of ``config`` whose ``rl_module_spec`` is ``module_id``'s own (its entry of a
    ``MultiRLModuleSpec``: see ``module_spec_of``), as one module's algorithm takes it."""
    return config.copy().rl_module(rl_module_spec=module_spec_of(
        config.sections.rl_module.rl_module_spec, module_id))


def play_modules(envs: list[Any], modules: dict[str, Any], mapping: dict[Any, str],
                 episodes: int, *, seed: int | None, writer: EpisodeWriter | None = None,
                 limits: EpisodeLimits | None = None) -> dict[str, Any]:
    """RLlib's evaluation statistics (``multi_agent_episode_statistics``) of ``episodes``
    episodes in the multi-agent ``envs``, every module of ``modules`` acting greedily for the
    agents ``mapping`` maps to it (with ``writer``: sampling its actions, each episode written
    and flushed); episode ``i`` is reset with ``seed + i``; ``limits``: how long an episode may
    run (``evaluation.env_limits``)."""
    as_policy = greedy_policy if writer is None else as_batch_policy
    played = list(multi_agent_rollout(
        envs, {module_id: as_policy(module) for module_id, module in modules.items()},
        mapping, episodes, seed=seed, limits=limits))
    if writer is not None:
        writer.add(played)
        writer.flush()
    return multi_agent_episode_statistics(played)


def greedy_policy(module: Any) -> Any:
    """``module``'s greedy actions as a batch policy (``obs -> (actions, {})``)."""
    return lambda obs: (module.compute_actions(obs), {})
