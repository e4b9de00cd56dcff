"""Offline-to-online fine-tuning, the recipe of docs/guide/mixing.md: an algorithm pre-trained on
a small ``medium``-tier dataset, then trained on from its checkpoint for the same iterations
twice: with ``"sampler"`` mixed into ``input_``, and on the offline data alone.

Prints one JSON line: the evaluation return (``--evaluation-episodes`` greedy episodes) after
every iteration of each phase (``offline``, then ``with_sampler`` and ``offline_only`` from the
same checkpoint), the mean of each phase's last three, the env steps the sampler played and its
env steps/s per runner, and each phase's seconds.

    PYTHONPATH=. python benchmarks/offline_to_online.py [--env Pendulum-v1] [--algorithm IQL]
        [--episodes 5] [--offline-iterations 6] [--online-iterations 8] [--updates 500]
        [--weight 0.5] [--training-intensity 64] [--exploration-epsilon 0.1]
        [--training '{"tau": 0.005}'] [--model-config '{"fcnet_hiddens": [64, 64]}']
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def train_and_evaluate(algo, iterations: int) -> tuple[list[float], dict, float]:
    """The evaluation return after each of ``iterations`` iterations, the last result, and
    the seconds it took."""
    started, returns = time.perf_counter(), []
    for _ in range(iterations):
        result = algo.train()
        returns.append(round(algo.evaluate()["env_runners"]["episode_return_mean"], 1))
    return returns, result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--algorithm", default="IQL", help="a registered algorithm's name")
    parser.add_argument("--episodes", type=int, default=5, help="medium-tier episodes recorded")
    parser.add_argument("--offline-iterations", type=int, default=6)
    parser.add_argument("--online-iterations", type=int, default=8)
    parser.add_argument("--updates", type=int, default=500, help="updates per iteration")
    parser.add_argument("--weight", type=float, default=0.5, help="the sampler's share")
    parser.add_argument("--training-intensity", type=float, default=64)
    parser.add_argument("--exploration-epsilon", type=float, default=0.1,
                        help="DQN's EpsilonGreedy final_epsilon (other algorithms sample their "
                             "own distribution)")
    parser.add_argument("--evaluation-episodes", type=int, default=20)
    parser.add_argument("--training", type=json.loads, default={},
                        help="more training() settings, as JSON: '{\"tau\": 0.005}'")
    parser.add_argument("--model-config", type=json.loads, default={},
                        help="rl_module(model_config=...) keys over the algorithm's defaults, "
                             "as JSON: '{\"fcnet_hiddens\": [64, 64]}'")
    args = parser.parse_args()

    from offline_rl.algorithms.registry import get_algorithm_config_class
    from offline_rl.datasets import make_dataset
    from offline_rl.names import COMPONENT_LEARNER_GROUP

    with tempfile.TemporaryDirectory() as tmp:
        data = str(Path(tmp) / "medium")
        make_dataset(args.env, data, tier="medium", episodes=args.episodes, seed=0,
                     progress=False)
        offline = (get_algorithm_config_class(args.algorithm)().environment(args.env)
                   .offline_data(input_=data, dataset_num_iters_per_learner=args.updates)
                   .evaluation(evaluation_duration=args.evaluation_episodes)
                   .debugging(seed=0))
        if args.algorithm == "DQN":
            offline.training(exploration_config={"type": "EpsilonGreedy",
                                                 "final_epsilon": args.exploration_epsilon})
        offline.training(**args.training).rl_module(model_config=args.model_config)
        with offline.build() as algo:
            offline_returns, _, offline_s = train_and_evaluate(algo, args.offline_iterations)
            checkpoint = algo.save_to_path(Path(tmp) / "offline")
        phases = {"offline": (offline_returns, offline_s)}
        with_sampler = (offline.copy()
                        .offline_data(input_={data: 1 - args.weight, "sampler": args.weight})
                        .training(training_intensity=args.training_intensity)
                        .env_runners(num_env_runners=1, num_envs_per_env_runner=8,
                                     num_cpus_per_env_runner=0))
        for name, config in (("with_sampler", with_sampler), ("offline_only", offline)):
            with config.build() as algo:
                algo.restore_from_path(checkpoint, component=COMPONENT_LEARNER_GROUP)
                returns, result, seconds = train_and_evaluate(algo, args.online_iterations)
            phases[name] = (returns, seconds)
            if name == "with_sampler":
                sampled = result["env_runners"]
    print(json.dumps({
        "benchmark": "offline_to_online", "env": args.env, "algorithm": args.algorithm,
        "medium_episodes": args.episodes, "updates_per_iteration": args.updates,
        "model_config": args.model_config,
        "sampler_weight": args.weight, "training_intensity": args.training_intensity,
        "returns": {name: returns for name, (returns, _) in phases.items()},
        "last_three_mean": {name: round(statistics.mean(returns[-3:]), 1)
                            for name, (returns, _) in phases.items()},
        "seconds": {name: round(seconds, 1) for name, (_, seconds) in phases.items()},
        "sampler_env_steps": sampled["num_env_steps_sampled_lifetime"],
        "sampler_env_steps_per_s_per_runner": [
            round(rate) for rate in sampled["env_steps_per_s_per_runner"]]}))


if __name__ == "__main__":
    main()
