"""``EnvEvaluationRounds``: what ``Algorithm.evaluate()`` plays in the env, and how.

Greedy episodes of the trained module, in this process (``EnvEvaluator``) or on evaluation
runner actors (``EvaluationRunners``, which may play while the learners update: the weights
from before the iteration's updates); or, with ``offline_data(output=...)``, episodes that
env runner actors play by sampling the policy, recorded to ``output`` (``Recorder``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any

from offline_rl.evaluation.action_wrappers import env_to_make
from offline_rl.evaluation.env_evaluation import EnvEvaluator
from offline_rl.evaluation.env_limits import evaluation_limits
from offline_rl.evaluation.smoothing import SmoothedEpisodes
from offline_rl.names import ENV_RUNNER_RESULTS
from offline_rl.recording.recorder import Recorder
from offline_rl.recording.recorder_config import RecorderConfig

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig
    from offline_rl.evaluation.evaluation_runners import EvaluationRunners
    from offline_rl.models.rl_module_spec import RLModuleSpec
    from offline_rl.settings.resource_plan import Actors

#: Envs one evaluator steps side by side, at most.
MAX_EVALUATION_ENVS = 8


def recording_config(config: AlgorithmConfig) -> RecorderConfig:
    """``evaluate()``'s recorder settings: ``evaluation_num_env_runners`` actors, if set."""
    recorder = config.recorder_config()
    runners = config.sections.evaluation.evaluation_num_env_runners
    recorder.env_runners = dataclasses.replace(
        recorder.env_runners, num_env_runners=runners or recorder.env_runners.num_env_runners)
    return recorder


class EnvEvaluationRounds:
    """The env evaluation of ``config`` (which names an env): its ``evaluator`` is built now
    (its spaces may be the data's), its runners by ``start_runners``, its recorder on the
    first ``record``."""

    def __init__(self, config: AlgorithmConfig):
        self.config = config
        sections = config.sections
        self.evaluator = EnvEvaluator(
            env_to_make(sections.environment), sections.environment.env_config,
            num_envs=min(sections.evaluation.evaluation_duration, MAX_EVALUATION_ENVS),
            seed=sections.debugging.seed, limits=evaluation_limits(sections))
        self.runners: EvaluationRunners | None = None
        self.recorder: Recorder | None = None
        self.smoothed = SmoothedEpisodes(sections.reporting.metrics_num_episodes_for_smoothing)

    @property
    def records(self) -> bool:
        """Whether evaluation records its episodes (``offline_data(output=...)``)."""
        return bool(self.config.sections.offline_data.output)

    def start_runners(self, spec: RLModuleSpec, runners: Actors) -> None:
        """Starts the evaluation runner actors the run's ``ResourcePlan`` sized, for
        ``spec``."""
        from offline_rl.evaluation.evaluation_runners import EvaluationRunners

        sections = self.config.sections
        self.runners = EvaluationRunners(
            env_to_make(sections.environment), sections.environment.env_config, spec,
            num_runners=runners.count, num_cpus=runners.cpus, seed=sections.debugging.seed,
            max_envs=min(math.ceil(sections.evaluation.evaluation_duration / runners.count),
                         MAX_EVALUATION_ENVS),
            limits=evaluation_limits(sections))

    def start(self, module: Any) -> tuple[float, Any]:
        """Starts the runners playing ``module``'s current weights (when there are runners);
        what ``finish`` takes."""
        if self.runners is None:
            return time.perf_counter(), None
        return time.perf_counter(), self.runners.start(
            module.state_dict(), self.config.sections.evaluation.evaluation_duration)

    def finish(self, module: Any, started: float, pending: Any) -> dict[str, Any]:
        """The episodes ``start`` began (played here now, without runners), smoothed."""
        if pending is None:
            returns, lengths = self.evaluator.evaluate_episodes(
                module.compute_actions, self.config.sections.evaluation.evaluation_duration)
        else:
            returns, lengths = self.runners.episodes(pending)
        return {ENV_RUNNER_RESULTS: self.smoothed.statistics(returns, lengths),
                "evaluation_time_s": time.perf_counter() - started}

    def record(self, module: Any, runners: Actors) -> dict[str, Any]:
        """Plays ``evaluation_duration`` episodes sampling ``module`` and records them, on the
        recorder's ``runners`` (as the run's ``ResourcePlan`` sized them)."""
        started = time.perf_counter()
        policy = copy.deepcopy(module).cpu()
        if self.recorder is None:
            self.recorder = Recorder(recording_config(self.config), policy,
                                     num_cpus=runners.cpus)
            policy = None
        recorded = self.recorder.record(self.config.sections.evaluation.evaluation_duration,
                                        policy=policy, progress=False)
        return {ENV_RUNNER_RESULTS: recorded, "evaluation_time_s": time.perf_counter() - started}

    def stop_actors(self) -> None:
        """Stops the recorder (flushing what it buffers) and the runners."""
        if self.recorder is not None:
            self.recorder.stop()
            self.recorder = None
        if self.runners is not None:
            self.runners.stop()
            self.runners = None

    def close(self) -> None:
        """Closes the evaluator's envs."""
        self.evaluator.close()
