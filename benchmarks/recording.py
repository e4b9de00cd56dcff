"""Recording throughput: env steps/s recorded with 1 and 2 env-runner actors, episodes vs
tabular output, with and without compression, beside the bare env stepping rate.

Each configuration prints one JSON line. ``bare_env_steps_per_s`` (the ceiling) steps the same
envs with the same scripted policy in this process, recording nothing.

    python benchmarks/recording.py [--episodes 64] [--envs-per-runner 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np

ENV = "CartPole-v1"


def scripted(obs: np.ndarray):
    """The CartPole expert over a batch, with its (deterministic) log-probability."""
    actions = (obs @ np.array([0.1, 0.5, 10.0, 2.0]) > 0).astype(np.int64)
    return actions, {"action_logp": np.zeros(len(obs), np.float32)}


def bare_env_steps_per_s(episodes: int, num_envs: int) -> float:
    from offline_rl.evaluation.rollout import make_env, rollout
    from offline_rl.recording.policies import as_batch_policy

    envs = [make_env(ENV) for _ in range(num_envs)]
    started = time.perf_counter()
    steps = sum(len(e) for e in rollout(envs, as_batch_policy(scripted), episodes, seed=0))
    elapsed = time.perf_counter() - started
    for env in envs:
        env.close()
    return steps / elapsed


def recorded_steps_per_s(runners: int, num_envs: int, episodes: int, write_episodes: bool,
                         compress: bool) -> float:
    from offline_rl import BCConfig
    from offline_rl.recording.recorder import Recorder

    with tempfile.TemporaryDirectory() as out:
        config = (BCConfig().environment(ENV)
                  .env_runners(num_env_runners=runners, num_envs_per_env_runner=num_envs,
                               num_cpus_per_env_runner=0)
                  .offline_data(output=out, output_write_episodes=write_episodes,
                                output_compress_columns=["obs"] if compress else [])
                  .debugging(seed=0))
        recorder = Recorder(config.recorder_config(), scripted)
        recorder.record(runners, progress=False)  # actors up and warm
        started = time.perf_counter()
        stats = recorder.record(episodes, progress=False)
        recorder.stop()
        return stats["num_env_steps"] / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--envs-per-runner", type=int, default=4)
    args = parser.parse_args()

    import ray

    ray.init(include_dashboard=False)
    bare = bare_env_steps_per_s(args.episodes // 4, args.envs_per_runner)
    for runners in (1, 2):
        for write_episodes in (True, False):
            for compress in ((False,) if write_episodes else (False, True)):
                rate = recorded_steps_per_s(runners, args.envs_per_runner, args.episodes,
                                            write_episodes, compress)
                print(json.dumps({
                    "num_env_runners": runners,
                    "num_envs_per_env_runner": args.envs_per_runner,
                    "format": "episodes" if write_episodes else "tabular",
                    "compressed": compress,
                    "env_steps_per_s": round(rate),
                    "bare_env_steps_per_s": round(bare),
                }), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
