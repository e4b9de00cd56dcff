"""Warm start: seconds from ``build()`` to a BC policy with an evaluation return of 450 on
CartPole, in a process where Ray is already up (a notebook's second run), beside the ceilings
measured in the same process.

Records one 100k-row CartPole expert dataset (``cold_start.py``'s), starts Ray, and trains once
unmeasured (the process's imports, Ray's worker processes). Then, ``--runs`` times:

- ours: ``build()``, then ``train()`` until the evaluation return (5 episodes every 5
  iterations, one update of batch 1024 each: ``cold_start.py``'s schedule) reaches 450. Phases,
  in seconds since ``build()`` was called: ``build_s``, ``first_batch_s``, ``to_return_450_s``;
  ``evaluation_s`` is the time the evaluations took in all; ``machine_cpu_s`` the CPU seconds
  the whole machine spent from ``build()`` until the algorithm stopped (Ray's worker processes
  included, from Linux's ``/proc/stat``);
- ceilings: plain Ray Data in the same Ray instance (``read_parquet`` -> ``map_batches`` on a
  one-actor pool -> first batch), and a bare torch update of the same network times the
  updates our run took.

Prints one JSON line: each figure's [min, median] over the runs.

    python benchmarks/warm_start.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from cold_start import (
    BATCH,
    EVALUATION_EPISODES,
    EVALUATION_INTERVAL,
    HIDDENS,
    LR,
    MAX_ITERATIONS,
    TARGET_RETURN,
    record_dataset,
    summary,
    torch_update_ms,
)


def machine_cpu_s() -> float:
    """CPU seconds the machine has been busy since it booted, all processes together."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    idle, iowait = ticks[3], ticks[4]
    return (sum(ticks) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def ours(data: Path) -> dict[str, float]:
    """One run: ``build()`` to the target return, its phases in seconds."""
    from offline_rl import BCConfig

    config = (BCConfig().environment("CartPole-v1")
              .training(lr=LR, train_batch_size_per_learner=BATCH)
              .offline_data(input_=str(data), dataset_num_iters_per_learner=1)
              .evaluation(evaluation_interval=EVALUATION_INTERVAL,
                          evaluation_duration=EVALUATION_EPISODES)
              .rl_module(model_config={"fcnet_hiddens": HIDDENS}).debugging(seed=0))
    started, cpu_before = time.perf_counter(), machine_cpu_s()
    marks = {"evaluation_s": 0.0}
    with config.build() as algo:
        marks["build_s"] = time.perf_counter() - started
        for iteration in range(MAX_ITERATIONS):
            result = algo.train()
            marks.setdefault("first_batch_s", time.perf_counter() - started)
            evaluation = result.get("evaluation", {})
            marks["evaluation_s"] += evaluation.get("evaluation_time_s", 0.0)
            score = evaluation.get("env_runners", {}).get("episode_return_mean")
            if score is not None and score >= TARGET_RETURN:
                marks["to_return_450_s"] = time.perf_counter() - started
                marks["updates"] = iteration + 1
                break
    marks["machine_cpu_s"] = machine_cpu_s() - cpu_before
    return marks


def plain_ray_data_first_batch_s(data: Path) -> float:
    """Plain Ray Data in this Ray instance: read -> one-actor map -> the first batch."""
    import ray.data

    class Identity:
        def __call__(self, batch):
            return batch

    started = time.perf_counter()
    dataset = ray.data.read_parquet(str(data)).map_batches(
        Identity, compute=ray.data.ActorPoolStrategy(size=1), batch_size=32768)
    next(iter(dataset.iter_batches(batch_size=BATCH)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        data = record_dataset(Path(tmp) / "cartpole", seed=100)
        ray.init(include_dashboard=False, logging_level="ERROR")
        ray.data.DataContext.get_current().enable_progress_bars = False
        ours(data)  # the process's first run: imports, Ray's workers
        runs = [ours(data) for _ in range(args.runs)]
        plain = [{"first_batch_s": plain_ray_data_first_batch_s(data)} for _ in range(args.runs)]
        ray.shutdown()
    update_ms = torch_update_ms()
    updates = summary(runs)["updates"][1]
    print(json.dumps({
        "ours": summary(runs),
        "plain_ray_data": summary(plain),
        "bare_torch_update_ms": round(update_ms, 3),
        "bare_torch_updates_s": round(update_ms * updates / 1000, 2),
        "runs": args.runs, "batch": BATCH,
        "figures": "[min, median] seconds since build() was called, Ray already up",
    }))


if __name__ == "__main__":
    main()
