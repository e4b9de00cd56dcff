"""``Algorithm``: data stream + learner + evaluator built from a config; ``train()`` iterates."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import ray

from offline_rl import checkpoint
from offline_rl.data.offline_data import OfflineData
from offline_rl.evaluation.env_evaluation import EnvEvaluator
from offline_rl.recording.recorder import Recorder

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig

ALL_MODULES = "__all_modules__"
MAX_EVALUATION_ENVS = 8


def start_ray() -> bool:
    """Connects to the cluster in ``RAY_ADDRESS`` or starts a local Ray instance.

    Returns whether this call started Ray (and so ``stop()`` should shut it down).
    """
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        ray.init()
    else:
        ray.init(include_dashboard=False)
    return True


class Algorithm:
    """Trains a policy from offline data.

    Building starts Ray Data in the background first, then builds the evaluation env and the torch
    learner while Ray spins up its workers. ``train()`` runs one iteration of
    ``dataset_num_iters_per_learner`` updates (default 1) and returns RLlib-shaped results;
    every ``evaluation_interval`` iterations it also evaluates the greedy policy in the env.

    Example:
        >>> from offline_rl import BCConfig
        >>> algo = (BCConfig().environment("CartPole-v1")          # doctest: +SKIP
        ...         .offline_data(input_="data/cartpole-expert").build())
        >>> result = algo.train()                                  # doctest: +SKIP
        >>> algo.evaluate()["env_runners"]["episode_return_mean"]  # doctest: +SKIP
        >>> algo.stop()                                            # doctest: +SKIP
    """

    def __init__(self, config: AlgorithmConfig):
        started = time.perf_counter()
        config.validate()
        self.config = config.copy()
        self._started_ray = start_ray()
        self.evaluator = None
        self.recorder: Recorder | None = None
        if self.config.env is not None:
            self.evaluator = EnvEvaluator(
                self.config.env,
                self.config.env_config,
                num_envs=min(self.config.evaluation_duration, MAX_EVALUATION_ENVS),
                seed=self.config.seed,
            )
        self.observation_space, self.action_space = self._spaces()
        self.offline_data = OfflineData(
            self.config, (self.observation_space, self.action_space)
        ).start()
        spec = self.config.get_rl_module_spec(self.observation_space, self.action_space)
        self.learner = self.config.get_default_learner_class()(self.config, spec)
        self.iteration = 0
        self.num_env_steps_trained_lifetime = 0
        self.num_updates_lifetime = 0
        self._train_time_s = 0.0
        self.build_time_s = time.perf_counter() - started

    def _spaces(self) -> tuple[gym.Space, gym.Space]:
        observation_space = self.config.observation_space
        action_space = self.config.action_space
        if self.evaluator is not None:
            observation_space = observation_space or self.evaluator.observation_space
            action_space = action_space or self.evaluator.action_space
        return observation_space, action_space

    @property
    def module(self) -> Any:
        """The trained torch policy module."""
        return self.learner.module

    def train(self) -> dict[str, Any]:
        """One training iteration; evaluates too when ``evaluation_interval`` says so."""
        started = time.perf_counter()
        wait_before = self.offline_data.stream.stats.wait_s
        updates = [
            self.learner.update(self.offline_data.sample())
            for _ in range(self.config.dataset_num_iters_per_learner or 1)
        ]
        stream = self.offline_data.stream.stats
        steps = sum(update["num_module_steps_trained"] for update in updates)
        self.iteration += 1
        self.num_env_steps_trained_lifetime += steps
        self.num_updates_lifetime += len(updates)
        elapsed = time.perf_counter() - started
        self._train_time_s += elapsed
        module_metrics = {
            key: float(np.mean([update[key] for update in updates])) for key in updates[0]
        }
        module_metrics["num_module_steps_trained"] = steps
        result: dict[str, Any] = {
            "training_iteration": self.iteration,
            "learners": {
                "default_policy": module_metrics,
                ALL_MODULES: {
                    "num_env_steps_trained": steps,
                    "num_env_steps_trained_lifetime": self.num_env_steps_trained_lifetime,
                    "num_env_steps_trained_lifetime_throughput":
                        self.num_env_steps_trained_lifetime / self._train_time_s,
                    "num_updates": len(updates),
                    "num_updates_lifetime": self.num_updates_lifetime,
                },
            },
            "data": {
                "epochs_completed": stream.epochs_completed,
                "rows_per_epoch": stream.epoch_rows[-1] if stream.epoch_rows else None,
                "wait_s": stream.wait_s - wait_before,
                "first_batch_wait_s": stream.first_batch_wait_s,
                "dropped": self.offline_data.dropped(),
            },
            "time_this_iter_s": elapsed,
            "time_total_s": self._train_time_s,
        }
        interval = self.config.evaluation_interval
        if interval and self.iteration % interval == 0:
            result["evaluation"] = self.evaluate()
        return result

    def evaluate(self) -> dict[str, Any]:
        """Runs ``evaluation_duration`` greedy episodes in the env. With
        ``offline_data(output=...)`` the episodes are instead played by the ``env_runners``
        actors, sampling the policy, and recorded to ``output``."""
        if self.evaluator is None:
            raise ValueError("evaluate() needs an env: set config.environment(env=...)")
        started = time.perf_counter()
        if self.config.output:
            policy = copy.deepcopy(self.learner.module).cpu()
            if self.recorder is None:
                self.recorder = Recorder(self.config, policy)
                policy = None
            recorded = self.recorder.record(self.config.evaluation_duration, policy=policy,
                                            progress=False)
            return {"env_runners": recorded,
                    "evaluation_time_s": time.perf_counter() - started}
        episodes = self.evaluator.evaluate(
            self.learner.module.compute_actions, self.config.evaluation_duration
        )
        return {"env_runners": episodes, "evaluation_time_s": time.perf_counter() - started}

    def save_to_path(self, path: str | Path) -> str:
        """Writes a checkpoint folder (weights, optimizer, config, counters); returns its path."""
        config = self.config.copy().environment(
            observation_space=self.observation_space, action_space=self.action_space
        )
        state = {
            "algorithm": config.algo_name,
            "training_iteration": self.iteration,
            "num_env_steps_trained_lifetime": self.num_env_steps_trained_lifetime,
            "num_updates_lifetime": self.num_updates_lifetime,
        }
        return str(checkpoint.write_checkpoint(path, self.learner, config, state))

    def restore_from_path(self, path: str | Path) -> None:
        """Loads weights, optimizer state and counters from a checkpoint folder."""
        state = checkpoint.read_algorithm_state(path)
        self.learner.load_state(checkpoint.learner_state_file(path))
        self.iteration = state["training_iteration"]
        self.num_env_steps_trained_lifetime = state["num_env_steps_trained_lifetime"]
        self.num_updates_lifetime = state["num_updates_lifetime"]

    @classmethod
    def from_checkpoint(cls, path: str | Path,
                        config: AlgorithmConfig | None = None) -> Algorithm:
        """Builds the algorithm of a checkpoint (with its saved config unless one is given)."""
        algorithm = (config or checkpoint.read_config(path)).build()
        algorithm.restore_from_path(path)
        return algorithm

    def stop(self) -> None:
        """Stops the data stream, envs and recorder (flushing what it buffers), and Ray if this
        algorithm started it."""
        self.offline_data.stop()
        if self.recorder is not None:
            self.recorder.stop()
            self.recorder = None
        if self.evaluator is not None:
            self.evaluator.close()
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def __enter__(self) -> Algorithm:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
