"""Multi-agent training on the reference task: ``MultiAgentCartPole`` recorded at one tier
(``offline-rl datasets make``), each agent's rows training a module of its own, for each
algorithm; beside it, the same algorithm on the single-agent CartPole data of the same tier and
size (one agent's share), which is what each module's learning should match.

Prints one JSON line: per algorithm, each module's evaluation return (``--evaluation-episodes``
greedy episodes of ``MultiAgentCartPole``) and the single-agent return, the seconds per
iteration of both (the multi-agent one trains every module), and the build times.

    PYTHONPATH=. python benchmarks/multi_agent.py [--tier mixed] [--episodes 60]
        [--algorithms BC IQL] [--iterations 8] [--updates 250]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

AGENTS = 2


def run(config, iterations: int, episodes: int) -> dict:
    """Builds, trains ``iterations`` iterations and evaluates ``config``; its figures."""
    started = time.perf_counter()
    with config.build() as algo:
        built = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(iterations):
            algo.train()
        per_iteration = (time.perf_counter() - started) / iterations
        evaluation = algo.evaluate()["env_runners"]
    returns = evaluation.get("module_episode_returns_mean") or {
        "single_agent": evaluation["episode_return_mean"]}
    return {"returns": {name: round(value, 1) for name, value in returns.items()},
            "seconds_per_iteration": round(per_iteration, 2), "build_s": round(built, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", default="mixed")
    parser.add_argument("--episodes", type=int, default=60, help="per agent")
    parser.add_argument("--algorithms", nargs="+", default=["BC", "IQL"])
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--updates", type=int, default=250, help="per iteration and module")
    parser.add_argument("--evaluation-episodes", type=int, default=20)
    args = parser.parse_args()
    import ray

    from offline_rl.algorithms.registry import get_algorithm_config_class
    from offline_rl.datasets import make_dataset

    ray.init(include_dashboard=False, logging_level="ERROR")
    folder = Path(tempfile.mkdtemp(prefix="multi-agent-bench-"))
    make_dataset("MultiAgentCartPole", folder / "multi", tier=args.tier,
                 episodes=args.episodes, seed=0, progress=False)
    make_dataset("CartPole-v1", folder / "single", tier=args.tier, episodes=args.episodes,
                 seed=0, progress=False)
    modules = {f"agent_{index}": f"module_{index}" for index in range(AGENTS)}
    figures = {}
    for name in args.algorithms:
        configs = {kind: (get_algorithm_config_class(name)().environment(env)
                          .offline_data(input_=str(folder / kind),
                                        dataset_num_iters_per_learner=args.updates)
                          .evaluation(evaluation_interval=None,
                                      evaluation_duration=args.evaluation_episodes)
                          .debugging(seed=0))
                   for kind, env in (("multi", "MultiAgentCartPole"), ("single", "CartPole-v1"))}
        configs["multi"].multi_agent(policies=sorted(modules.values()),
                                     policy_mapping_fn=modules)
        figures[name] = {f"{kind}_agent": run(config, args.iterations, args.evaluation_episodes)
                         for kind, config in configs.items()}
    ray.shutdown()
    print(json.dumps({"benchmark": "multi_agent", "env": "MultiAgentCartPole", "tier": args.tier,
                      "episodes_per_agent": args.episodes, "iterations": args.iterations,
                      "updates_per_iteration": args.updates, "algorithms": figures}))


if __name__ == "__main__":
    main()
