"""Scaling: env steps/s for num_learners 0, 1, 2 x PreLearner concurrency 1, 2 on the same data.

Prints one JSON line per configuration: build time, the first iteration (the first pass maps
the data through the PreLearners), steady env steps/s over epochs of the mapped data, and the
same with ``materialize_mapped_data=False`` (every epoch re-runs the PreLearners, so their
concurrency matters). The ceiling, measured in the same run, is a bare torch update of the same
module and batch in this process (``bare_torch_env_steps_per_s``). With a CUDA device, a
``num_gpus_per_learner=1`` learner is measured too. Run ``make bench`` first to record the data.

    python benchmarks/scaling.py [--config configs/bc_cartpole.yaml] [--epochs 4]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import ray

from offline_rl.algorithms.algorithm_config import AlgorithmConfig


def measure(config: AlgorithmConfig, epochs: int) -> dict[str, float]:
    """Build time, first-iteration time and steady env steps/s (one epoch per iteration)."""
    started = time.perf_counter()
    algo = config.build()
    build_s = time.perf_counter() - started
    try:
        started = time.perf_counter()
        algo.train()
        first_s = time.perf_counter() - started
        steps, started = 0, time.perf_counter()
        for _ in range(epochs):
            steps += algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"]
        return {"build_s": round(build_s, 2), "first_iter_s": round(first_s, 2),
                "env_steps_per_s": round(steps / (time.perf_counter() - started))}
    finally:
        algo.stop()


def bare_torch_env_steps_per_s(config: AlgorithmConfig, updates: int = 100) -> float:
    """Env steps/s of forward + BC loss + backward + Adam on ready tensors (no data path)."""
    import gymnasium as gym
    import torch

    env = gym.make(config.env)
    module = config.get_rl_module_spec(env.observation_space, env.action_space).build()
    optimizer = torch.optim.Adam(module.parameters(), lr=config.lr)
    batch = config.train_batch_size_per_learner
    obs = torch.randn(batch, *env.observation_space.shape)
    actions = torch.randint(0, env.action_space.n, (batch,))
    dist_cls = module.get_train_action_dist_cls()
    started = time.perf_counter()
    for _ in range(updates):
        logits = module.forward_train({"obs": obs})["action_dist_inputs"]
        loss = -dist_cls.from_logits(logits).logp(actions).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return updates * batch / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/bc_cartpole.yaml"))
    parser.add_argument("--epochs", type=int, default=4, help="timed epochs per configuration")
    args = parser.parse_args()
    import torch

    ray.init(include_dashboard=False, logging_level="ERROR")
    cpus = ray.cluster_resources()["CPU"]
    base = (AlgorithmConfig.from_yaml(args.config)
            .offline_data(dataset_num_iters_per_learner=None)
            .evaluation(evaluation_interval=None))
    ceiling = round(bare_torch_env_steps_per_s(base))
    measure(base.copy(), 1)  # untimed: a fresh Ray instance's first pipeline starts its workers
    runs = [(learners, concurrency, 0) for learners in (0, 1, 2) for concurrency in (1, 2)]
    if torch.cuda.is_available():
        runs.append((1, 1, 1))
    for learners, concurrency, gpus in runs:
        pool = {"concurrency": concurrency, "num_cpus": min(1.0, (cpus - 1) / concurrency)}
        config = (base.copy().learners(num_learners=learners, num_gpus_per_learner=gpus)
                  .offline_data(map_batches_kwargs=pool))
        line = {"num_learners": learners, "concurrency": concurrency,
                "num_gpus_per_learner": gpus, **measure(config, args.epochs)}
        streaming = measure(config.copy().offline_data(materialize_mapped_data=False),
                            args.epochs)
        line["streaming_env_steps_per_s"] = streaming["env_steps_per_s"]
        line["bare_torch_env_steps_per_s"] = ceiling
        line["batch_size_per_learner"] = base.train_batch_size_per_learner
        print(json.dumps(line), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
