"""``EvaluationRunners``: evaluation episodes played by Ray actors, in parallel with each other
and, when asked, with training (RLlib's ``evaluation_num_env_runners`` and
``evaluation_parallel_to_training``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import ray
import torch

from offline_rl.data.ray.actors import kill_actors
from offline_rl.evaluation.env_evaluation import EnvEvaluator
from offline_rl.evaluation.env_limits import EpisodeLimits, warn_cut
from offline_rl.evaluation.rollout import EnvSpec
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.placement import check_fits
from offline_rl.statistics import episode_statistics

#: Most envs one runner steps side by side.
MAX_ENVS_PER_RUNNER = 8


class EvaluationRunners:
    """``num_runners`` actors, each with its own envs and a copy of the module built from
    ``module_spec``. ``start(weights, n)`` hands them the weights and splits ``n`` episodes
    between them, returning at once; ``result(pending)`` waits for the episodes' statistics.
    Episode ``i`` is reset with ``seed + i`` whichever runner plays it, so the figures do not
    depend on the number of runners.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> spec = RLModuleSpec(observation_space=gym.spaces.Box(-5, 5, (4,), np.float32),
        ...                     action_space=gym.spaces.Discrete(2))
        >>> module = spec.build()
        >>> runners = EvaluationRunners("CartPole-v1", {}, spec, num_runners=2, num_cpus=0,
        ...                             seed=0)
        >>> pending = runners.start(module.state_dict(), 3)   # returns while they play
        >>> runners.result(pending)["num_episodes"]
        3
        >>> runners.stop()
    """

    def __init__(self, env: EnvSpec, env_config: dict[str, Any], module_spec: RLModuleSpec, *,
                 num_runners: int, num_cpus: float, seed: int | None = None,
                 max_envs: int = MAX_ENVS_PER_RUNNER, limits: EpisodeLimits | None = None):
        check_fits(f"{num_runners} evaluation env runner(s) x {num_cpus:g} CPU",
                   {"CPU": num_runners * num_cpus},
                   "lower evaluation_num_env_runners or num_cpus_per_env_runner (0 shares the "
                   "CPUs), or add CPUs")
        runner = ray.remote(num_cpus=num_cpus, max_restarts=0)(_EvaluationRunner)
        limits = EpisodeLimits() if limits is None else limits
        self.runners = [runner.remote(env, env_config, module_spec, seed, max_envs,
                                      dataclasses.replace(
                                          limits, player=f"evaluation env runner {index}"))
                        for index in range(num_runners)]

    def start(self, weights: dict[str, Any], num_episodes: int) -> list[ray.ObjectRef]:
        """Starts ``num_episodes`` greedy episodes of the module with ``weights``."""
        weights_ref = ray.put({name: torch.as_tensor(value).cpu()
                               for name, value in weights.items()})
        shares = np.array_split(np.arange(num_episodes), len(self.runners))
        return [runner.play.remote(weights_ref, len(share), int(share[0]))
                for runner, share in zip(self.runners, shares) if len(share)]

    def result(self, pending: list[ray.ObjectRef]) -> dict[str, int | float | None]:
        """The statistics (``offline_rl.statistics.episode_statistics``) of started episodes
        (a warning for the episodes a runner cut)."""
        return episode_statistics(*self.episodes(pending))

    def episodes(self, pending: list[ray.ObjectRef]) -> tuple[list[float], list[int]]:
        """``result``'s episodes: their returns and lengths (a warning for those cut)."""
        returns, lengths = [], []
        for runner_returns, runner_lengths, cut_notice in ray.get(pending):
            returns += runner_returns
            lengths += runner_lengths
            warn_cut(cut_notice)
        return returns, lengths

    def stop(self) -> None:
        """Releases the actors (and their envs)."""
        kill_actors(self.runners)
        self.runners = []


class _EvaluationRunner:
    def __init__(self, env: EnvSpec, env_config: dict[str, Any], module_spec: RLModuleSpec,
                 seed: int | None, max_envs: int, limits: EpisodeLimits):
        torch.set_num_threads(1)
        self.module = module_spec.build()
        self.evaluator = EnvEvaluator(env, env_config, num_envs=max_envs, seed=seed,
                                      limits=limits)
        self.evaluator.adapt_to(module_spec.observation_space, module_spec.action_space)

    def play(self, weights: dict[str, torch.Tensor], num_episodes: int,
             first_episode: int) -> tuple[list[float], list[int], str | None]:
        self.module.load_state_dict(weights)
        with torch.no_grad():
            returns, lengths = self.evaluator.play(self.module.compute_actions, num_episodes,
                                                   first_episode)
        return returns, lengths, self.evaluator.limits.take_cut()[1]
