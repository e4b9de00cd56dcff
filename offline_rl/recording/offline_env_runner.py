"""``OfflineSingleAgentEnvRunner``: RLlib's recording env runner, played in this process.

A thin front over a ``Recorder``'s env runner (``recorder._EnvRunner``: its envs, seeds, episode
limits and writer), shaped as RLlib 2.60's ``ray.rllib.offline.offline_env_runner`` class:
built from any algorithm's config with ``offline_data(output=...)``, ``sample()`` plays the
env with random actions or the config's module (a new one, as RLlib's env runner builds it)
and writes what it played to ``output`` in RLlib's layout, ``<output>/<env id lowercased>/
run-<worker_index:06d>-<write:05d>/``, one folder per ``sample()`` call (or per
``output_max_rows_per_file`` rows, when set); ``stop()`` writes what is still buffered.

Unlike RLlib's, every episode written is done: with ``batch_mode="truncate_episodes"`` the
episodes still running when ``sample(num_timesteps=n)`` has played its ``n`` steps are written
cut, ending truncated (a learner bootstraps from their last observation, as at a time limit),
and each call starts new episodes (RLlib continues the cut one in the next call under the same
id, which would write one episode into two files, the first not done).
"""

from __future__ import annotations

import math
import sys
from typing import Any

from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError, surface_errors
from offline_rl.recording.output_folder import new_run_id
from offline_rl.recording.policies import random_policy
from offline_rl.recording.recorder import RUNNER_SEED_STRIDE, _EnvRunner, check_output


class OfflineSingleAgentEnvRunner:
    """Plays ``config``'s env (its ``env_runners`` options: envs per runner, ``batch_mode``,
    ``rollout_fragment_length``, ``max_episode_steps``) and records what it plays to
    ``offline_data(output=...)`` with the config's ``output*`` options, as worker
    ``worker_index`` (the folders' runner number). ``config`` is any algorithm's config
    (``BCConfig``, ``DQNConfig``, ...); the output is checked as a ``Recorder`` checks it
    (``ConfigError`` without ``output``, ``OutputError`` for an output that overlaps an
    input or holds files offline-rl did not write).

    Examples:
        >>> import tempfile
        >>> from offline_rl import BCConfig
        >>> config = (BCConfig().environment("CartPole-v1")
        ...           .env_runners(batch_mode="truncate_episodes")
        ...           .offline_data(output=tempfile.mkdtemp(), output_write_episodes=False))
        >>> runner = OfflineSingleAgentEnvRunner(config, worker_index=1)
        >>> episodes = runner.sample(num_timesteps=50, random_actions=True)
        >>> sum(map(len, episodes)), [path.rsplit("/", 3)[-3:-1] for path in runner.stop()]
        (50, [['cartpole-v1', 'run-000001-00001']])
    """

    @surface_errors
    def __init__(self, config: Any, worker_index: int = 0):
        recorder_config = config.recorder_config()
        check_output(recorder_config)
        if recorder_config.environment.env is None:
            raise ConfigError("OfflineSingleAgentEnvRunner plays an env: set "
                              "config.environment(env=...)")
        if isinstance(worker_index, bool) or not isinstance(worker_index, int) \
                or worker_index < 0:
            raise ConfigError(f"OfflineSingleAgentEnvRunner(worker_index={worker_index!r}): "
                              "give a whole number >= 0 (it numbers the run-... folders)")
        self.config = config
        self.worker_index = worker_index
        self._runner = runner = _EnvRunner(recorder_config, None, worker_index, new_run_id())
        env = runner.envs[0]
        #: The module ``sample(random_actions=False)`` plays: the config's, newly built.
        self.module = config.get_rl_module_spec(env.observation_space, env.action_space).build()
        runner.set_policy(self.module)

    @surface_errors
    def sample(self, *, num_timesteps: int | None = None, num_episodes: int | None = None,
               explore: bool | None = None, random_actions: bool = False,
               force_reset: bool = False) -> list[SingleAgentEpisode]:
        """Plays ``num_episodes`` whole episodes, or ``num_timesteps`` env steps (see
        ``batch_mode``; neither: ``rollout_fragment_length`` steps per env), with random
        actions or the module (its action distribution sampled, ``explore=True``), writes
        them and returns them. Each call starts new episodes (``force_reset`` is always so)."""
        if explore is False:
            raise ConfigError("OfflineSingleAgentEnvRunner.sample(explore=False): recording "
                              "samples the module's action distribution (explore=True), whose "
                              "log-probabilities it records; drop explore")
        if num_timesteps is not None and num_episodes is not None:
            raise ConfigError("OfflineSingleAgentEnvRunner.sample(): give num_timesteps or "
                              "num_episodes, not both")
        for name, value in (("num_timesteps", num_timesteps), ("num_episodes", num_episodes)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ConfigError(f"OfflineSingleAgentEnvRunner.sample({name}={value!r}): give "
                                  "a whole number, at least 1")
        runners = self._runner.config.env_runners
        policy = None
        if random_actions:
            seed = self._runner.config.debugging.seed
            policy = random_policy(self._runner.envs[0].action_space, None if seed is None else
                                   seed + RUNNER_SEED_STRIDE * self.worker_index
                                   + self._runner.episodes_started)
        if num_episodes is not None:
            episodes = self._runner.play(num_episodes, policy=policy)
        else:
            steps = num_timesteps or self._fragment_steps()
            episodes = self._runner.play(sys.maxsize, steps=steps, policy=policy,
                                         cut=runners.batch_mode == "truncate_episodes")
        if self._runner.config.offline_data.output_max_rows_per_file is None:
            self._runner.flush()
        return episodes

    @surface_errors
    def stop(self) -> list[str]:
        """Writes what is still buffered, closes the envs; returns every file written."""
        return self._runner.stop()

    def _fragment_steps(self) -> int:
        """RLlib's steps for ``sample()``: ``rollout_fragment_length`` per env ("auto": the
        ``train_batch_size_per_learner`` shared over the env runners and their envs)."""
        runners = self._runner.config.env_runners
        length = runners.rollout_fragment_length
        if length == "auto":
            batch = self.config.sections.training.train_batch_size_per_learner
            length = math.ceil(batch / (max(1, runners.num_env_runners)
                                        * runners.num_envs_per_env_runner))
        return length * runners.num_envs_per_env_runner
