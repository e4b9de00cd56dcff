"""``OnlineSampler``: env runner actors playing the current policy, with exploration, for the
``"sampler"`` share of ``input_`` (RLlib's ``EnvRunnerGroup`` when training online).

Each runner holds ``num_envs_per_env_runner`` envs and a copy of the module; ``start(weights,
version, num_env_steps)`` hands every runner the weights and its share of the env steps and
returns at once; ``collect()`` waits for the complete episodes (as ``get_state()`` dicts, flat
numpy data that crosses process boundaries cheaply) and their figures. Runners sample the
module's exploration distribution (``recording.policies``: stochastic policies sample their
action distribution; DQN and DiscreteCQL act with their ``exploration_config``,
``EpsilonGreedy`` or ``SoftQ``). A runner plays whole episodes until it has its steps; the
episodes still running then are dropped and not counted. Episodes are cut at
``max_episode_steps`` (``env_runners``; else the env spec's), so a round plays at most its
share plus a cut episode per env; one that runs ``sample_timeout_s`` without ending raises
``EnvError``, as does an error the env raises (``evaluation.env_limits``). With ``record``,
each runner writes its episodes with the recording writer (``offline_data(output=...)``), as a
run of its own (its own run id in the file names, so nothing is overwritten).

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> from offline_rl.models.rl_module_spec import RLModuleSpec
    >>> from offline_rl.settings.environment import EnvironmentConfig
    >>> from offline_rl.settings.resources import EnvRunnersConfig
    >>> config = RecorderConfig(EnvironmentConfig(env="CartPole-v1"),
    ...                         EnvRunnersConfig(num_env_runners=2, num_cpus_per_env_runner=0))
    >>> spec = RLModuleSpec(observation_space=gym.spaces.Box(-5, 5, (4,), np.float32),
    ...                     action_space=gym.spaces.Discrete(2))
    >>> sampler = OnlineSampler(config, spec)
    >>> sampler.start(spec.build().state_dict(), 0, num_env_steps=100)
    >>> episodes, figures = sampler.collect()
    >>> figures["num_env_steps_sampled"] >= 100, figures["num_episodes"] == len(episodes)
    (True, True)
    >>> len(figures["env_steps_per_s_per_runner"]), figures["weights_version"]
    (2, 0)
    >>> figures["num_episodes_cut"]  # CartPole's TimeLimit ends them itself, at 500 steps
    0
    >>> sampler.stop()
    []
"""

from __future__ import annotations

import math
import time
from typing import Any

import ray
import torch

from offline_rl.data.ray.actors import kill_actors
from offline_rl.evaluation.action_wrappers import env_to_make
from offline_rl.evaluation.env_limits import sampling_limits, warn_cut
from offline_rl.evaluation.rollout import make_env, rollout
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.recording.output_folder import new_run_id
from offline_rl.recording.policies import as_batch_policy
from offline_rl.recording.recorder import (
    RUNNER_SEED_STRIDE,
    checked_env_runner_cpus,
    close_writer,
    runner_writer,
    write_episode,
)
from offline_rl.recording.recorder_config import RecorderConfig
from offline_rl.statistics import episode_statistics


class OnlineSampler:
    """``config.env_runners.runner_actors`` actors with ``num_cpus`` CPUs each (as the run's
    ``ResourcePlan`` sized them; else ``num_cpus_per_env_runner``; 0 shares the CPUs) playing
    the module of ``module_spec``; with ``record``, writing their episodes to
    ``config.offline_data.output``. Counts env steps and episodes over its life
    (``state``/``set_state`` keep the counts across checkpoints)."""

    def __init__(self, config: RecorderConfig, module_spec: RLModuleSpec, *,
                 record: bool = False, num_cpus: float | None = None):
        cpus = checked_env_runner_cpus(config, num_cpus)
        run_id = new_run_id() if record else None
        runner = ray.remote(num_cpus=cpus, max_restarts=0)(_SamplerRunner)
        self.runners = [runner.remote(config, module_spec, index, run_id)
                        for index in range(config.env_runners.runner_actors)]
        self._pending: list[ray.ObjectRef] = []
        self.num_env_steps_sampled_lifetime = 0
        self.num_episodes_lifetime = 0

    @property
    def sampling(self) -> bool:
        """Whether a round started by ``start`` is not collected yet."""
        return bool(self._pending)

    def start(self, weights: dict[str, Any], version: int, num_env_steps: int) -> None:
        """Starts a round: every runner loads ``weights`` (the learners' after ``version``
        optimizer steps) and plays at least its share of ``num_env_steps`` steps."""
        weights_ref = ray.put({name: torch.as_tensor(value).cpu()
                               for name, value in weights.items()})
        share = max(1, math.ceil(num_env_steps / len(self.runners)))
        self._pending = [runner.play.remote(weights_ref, version, share)
                         for runner in self.runners]

    def collect(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Waits for the round ``start`` began: its episodes (``get_state()`` dicts) and
        figures under RLlib's names (``num_env_steps_sampled``, ``num_episodes``,
        ``episode_return_mean``..., the lifetime counts), plus each runner's env steps per
        second, the weights' ``version`` the round played, and the episodes cut at
        ``max_episode_steps`` (``num_episodes_cut``; a warning says so)."""
        rounds, self._pending = ray.get(self._pending), []
        for *_, cut_notice in rounds:
            warn_cut(cut_notice)
        episodes = [state for states, *_ in rounds for state in states]
        returns = [value for _, runner_returns, *_ in rounds for value in runner_returns]
        lengths = [len(state["actions"]["data"]) for state in episodes]
        figures = episode_statistics(returns, lengths)
        steps = figures.pop("num_env_steps")
        self.num_env_steps_sampled_lifetime += steps
        self.num_episodes_lifetime += len(episodes)
        return episodes, {
            "num_env_steps_sampled": steps,
            **figures,
            "num_env_steps_sampled_lifetime": self.num_env_steps_sampled_lifetime,
            "num_episodes_lifetime": self.num_episodes_lifetime,
            "env_steps_per_s_per_runner": [runner_steps / max(seconds, 1e-9)
                                           for _, _, runner_steps, seconds, *_ in rounds],
            "weights_version": min(version for *_, version, _, _ in rounds),
            "num_episodes_cut": sum(cut for *_, cut, _ in rounds),
        }

    def state(self) -> dict[str, int]:
        """The lifetime counts, for a checkpoint."""
        return {"num_env_steps_sampled_lifetime": self.num_env_steps_sampled_lifetime,
                "num_episodes_lifetime": self.num_episodes_lifetime}

    def set_state(self, state: dict[str, int]) -> None:
        """Restores ``state()``'s counts."""
        self.num_env_steps_sampled_lifetime = state["num_env_steps_sampled_lifetime"]
        self.num_episodes_lifetime = state["num_episodes_lifetime"]

    def stop(self) -> list[str]:
        """Waits for a round still running, flushes the runners' writers; returns the files
        recorded; releases the actors."""
        ray.wait(self._pending, num_returns=len(self._pending))
        files = [path for paths in ray.get([runner.stop.remote() for runner in self.runners])
                 for path in paths]
        kill_actors(self.runners)
        self.runners, self._pending = [], []
        return files


class _SamplerRunner:
    """One env runner: its envs, a copy of the module, and its writer when recording."""

    def __init__(self, config: RecorderConfig, module_spec: RLModuleSpec, index: int,
                 run_id: str | None):
        torch.set_num_threads(1)
        self.module = module_spec.build()
        self.policy = as_batch_policy(self.module)
        self.envs = [make_env(env_to_make(config.environment), config.environment.env_config)
                     for _ in range(config.env_runners.num_envs_per_env_runner)]
        seed = config.debugging.seed
        self.next_seed = None if seed is None else seed + RUNNER_SEED_STRIDE * (index + 1)
        self.writer = None if run_id is None else runner_writer(config, index, run_id, False)
        self.files: list[str] = []
        self.limits = sampling_limits(config.env_runners, f"the sampler's env runner {index}")

    def play(self, weights: dict[str, torch.Tensor], version: int, num_env_steps: int
             ) -> tuple[list[dict[str, Any]], list[float], int, float, int, int, str | None]:
        """Complete episodes of at least ``num_env_steps`` steps in all: their states, returns,
        the steps, the seconds it took, ``version``, and the episodes cut (the count and the
        notice)."""
        started = time.perf_counter()
        self.module.load_state_dict(weights)
        states, returns, steps = [], [], 0
        for episode in rollout(self.envs, self.policy, num_env_steps, seed=self.next_seed,
                               limits=self.limits):
            if self.writer is not None:
                self.files += write_episode(self.writer, episode)
            states.append(episode.get_state())
            returns.append(episode.get_return())
            steps += len(episode)
            if self.next_seed is not None:
                self.next_seed += 1
            if steps >= num_env_steps:
                break
        return (states, returns, steps, time.perf_counter() - started, version,
                *self.limits.take_cut())

    def stop(self) -> list[str]:
        if self.writer is not None:
            self.files += close_writer(self.writer)
        for env in self.envs:
            env.close()
        return self.files
