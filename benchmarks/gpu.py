"""GPU learners: updates/s beside a bare GPU update, the share of time waiting for data, and
the rows/s the pipeline delivers with the PreLearner pool scaled to the machine's CPUs.

Needs torch with CUDA and at least one GPU (``make gpu-check`` runs this, then the tests
marked ``gpu``). Records a CartPole expert dataset first when ``--input`` does not exist. For
each learner setup, ``local`` (``num_learners=0``), ``remote`` (one learner actor) and, with two
GPUs or more, ``nccl`` (one learner per GPU, all-reducing gradients with nccl), and for each
feed, ``materialized`` (the mapped data in the object store) and ``repeated_epochs``
(``materialize_mapped_data=False`` with the raw input in memory: the PreLearners run during
training, one Ray Data execution over many epochs):

- ``updates_per_s`` and ``env_steps_per_s`` over the timed iterations (steps of all learners);
- ``data_wait_share``: the share of that time a learner waited for its next batch;
- ``bare_gpu_update_ms``: forward, BC loss, backward and Adam step of the same module and
  batch on tensors already on the GPU (the ceiling), and ``bare_gpu_updates_per_s``.

``pipeline_rows_per_s`` is the data alone: batches taken from the streaming pipeline as fast as
it delivers them, with ``prelearner_actors`` actors, for ``repeated_epochs`` and for
``epoch_by_epoch`` (the raw input not in memory: a Ray Data execution, with a new actor pool,
each epoch). Prints one JSON line; [min, median] over ``--runs`` (and each setup's figures on
stderr as they come).

    python benchmarks/gpu.py [--input data/cartpole-gpu] [--batch 4096] [--iterations 10]
        [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bc_cartpole import FEEDS as PIPELINE_FEEDS
from bc_cartpole import bare_torch_update_ms, data_only, min_median

UPDATES_PER_ITERATION = 50
FEEDS = {feed: PIPELINE_FEEDS[feed] for feed in ("materialized", "repeated_epochs")}
STREAMED_FEEDS = {feed: PIPELINE_FEEDS[feed] for feed in ("repeated_epochs", "epoch_by_epoch")}


def learner_setups(gpus: int) -> dict[str, int]:
    """``num_learners`` for each setup the machine can run."""
    setups = {"local": 0, "remote": 1}
    if gpus >= 2:
        setups["nccl"] = gpus
    return setups


def measure(config, iterations: int) -> dict[str, float]:
    """Trains ``iterations`` timed iterations after 3 untimed ones."""
    algo = config.build()
    try:
        for _ in range(3):
            algo.train()
        steps = waited = 0.0
        started = time.perf_counter()
        for _ in range(iterations):
            result = algo.train()
            steps += result["learners"]["__all_modules__"]["num_env_steps_trained"]
            waited += result["data"]["wait_s"]
        elapsed = time.perf_counter() - started
    finally:
        algo.stop()
    return {"updates_per_s": iterations * UPDATES_PER_ITERATION / elapsed,
            "env_steps_per_s": steps / elapsed, "data_wait_share": waited / elapsed}


def pipeline_rows_per_s(config, batches: int, feed: str) -> tuple[float, dict]:
    """Rows/s the streaming pipeline (``feed``) delivers to a local learner, the data alone,
    and one of its batches."""
    algo = config.copy().learners(num_learners=0, num_gpus_per_learner=0).offline_data(
        **STREAMED_FEEDS[feed]).build()
    try:
        stream, batch_size = algo.learner_group.stream, algo.config.train_batch_size_per_learner
        return data_only(stream, batch_size, batches)[0], stream.next_batch(batch_size)
    finally:
        algo.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/bc_cartpole.yaml"))
    parser.add_argument("--input", type=Path, default=Path("data/cartpole-gpu"))
    parser.add_argument("--episodes", type=int, default=400, help="if --input is recorded")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import gymnasium as gym
    import ray
    import torch

    from offline_rl.algorithms.algorithm_config import AlgorithmConfig
    from offline_rl.datasets import make_dataset

    if not torch.cuda.is_available():
        raise SystemExit(f"benchmarks/gpu.py needs a CUDA GPU; torch {torch.__version__} sees "
                         "none. Install a CUDA build of torch (see `make gpu-check`).")
    if not args.input.exists():
        make_dataset("CartPole-v1", args.input, tier="expert", episodes=args.episodes,
                     progress=False)
    ray.init(include_dashboard=False, logging_level="ERROR")
    cpus, gpus = int(ray.cluster_resources()["CPU"]), int(ray.cluster_resources()["GPU"])
    actors = max(1, cpus - 2)  # a CPU each for the read task and the main process
    config = (AlgorithmConfig.from_yaml(args.config)
              .training(train_batch_size_per_learner=args.batch)
              .offline_data(input_=str(args.input),
                            dataset_num_iters_per_learner=UPDATES_PER_ITERATION,
                            input_read_batch_size=args.batch,
                            map_batches_kwargs={"concurrency": actors})
              .evaluation(evaluation_interval=None))
    env = gym.make(config.env)
    spaces = (env.observation_space, env.action_space)
    # The ceilings first, so that a run cut short still has them.
    pipeline = {feed: [pipeline_rows_per_s(config, 200, feed) for _ in range(args.runs)]
                for feed in STREAMED_FEEDS}
    batch = pipeline["repeated_epochs"][0][1]
    bare_ms = [bare_torch_update_ms(config, spaces, batch, device="cuda")
               for _ in range(args.runs)]
    pipeline_rates = {feed: min_median([rate for rate, _ in runs], 0)
                      for feed, runs in pipeline.items()}
    print(f"pipeline_rows_per_s: {pipeline_rates}, bare_gpu_update_ms: {bare_ms}",
          file=sys.stderr, flush=True)
    figures: dict[str, dict] = {}
    for setup, learners in learner_setups(gpus).items():
        for feed, options in FEEDS.items():
            runs = [measure(config.copy().learners(num_learners=learners,
                                                   num_gpus_per_learner=1)
                            .offline_data(**options), args.iterations)
                    for _ in range(args.runs)]
            figures[f"{setup}_{feed}"] = {
                name: min_median([run[name] for run in runs], 3) for name in runs[0]}
            print(f"{setup}_{feed}: {figures[f'{setup}_{feed}']}", file=sys.stderr, flush=True)
    ray.shutdown()
    print(json.dumps({
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cpus": cpus, "gpus": gpus, "batch": args.batch,
        "updates_per_iteration": UPDATES_PER_ITERATION, "learners": figures,
        "bare_gpu_update_ms": min_median(bare_ms, 3),
        "bare_gpu_updates_per_s": round(1000 / statistics.median(bare_ms), 1),
        "pipeline_rows_per_s": pipeline_rates, "prelearner_actors": actors,
    }))


if __name__ == "__main__":
    main()
