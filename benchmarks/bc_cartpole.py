"""BC on CartPole: startup, per-iteration cost, data throughput and time to a return of 450.

Prints one JSON line. Ceilings measured in the same run: a bare torch update of the same module
and batch (``bare_torch_update_ms``) and pyarrow's Parquet decode rate of the same files
(``parquet_decode_rows_per_s``). Run ``make bench`` (records the dataset first if needed).

``streaming`` compares, for each input of ``--streaming-inputs`` (by row count), the ways the
learner can be fed: the mapped data materialized (``materialized``), streamed with one Ray Data
execution per epoch (``epoch_by_epoch``: ``materialize_mapped_data=False``), and streamed with
many epochs per execution (``repeated_epochs``: ``materialize_data=True`` too). For each, the
steady training rate (20 ``train()`` calls of 50 updates) and, data only over two epochs, the
worst wait for a batch that crossed an epoch boundary; [min, median] of ``--streaming-runs``.
A 2M-row input: ``offline-rl datasets make CartPole-v1 expert --out data/cartpole-2m
--episodes 4000``.

    python benchmarks/bc_cartpole.py [--config configs/bc_cartpole.yaml] [--iterations 300]
        [--streaming-inputs data/cartpole-expert data/cartpole-2m] [--streaming-runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import sys, time
from offline_rl.algorithms.algorithm_config import AlgorithmConfig
config = AlgorithmConfig.from_yaml(sys.argv[1])
algo = config.build()
for _ in range(int(sys.argv[2])):
    result = algo.train()
    if result.get("evaluation", {}).get("env_runners", {}).get("episode_return_mean", 0) >= 450:
        print("REACHED", time.time(), result["training_iteration"], flush=True)
        break
algo.stop()
"""


def time_to_return(config: Path, target_iterations: int) -> tuple[float | None, int | None]:
    """Seconds from spawning a fresh Python process to its first evaluation return >= 450."""
    spawned = time.time()
    out = subprocess.run([sys.executable, "-c", CHILD, str(config), str(target_iterations)],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("REACHED"):
            _, stamp, iteration = line.split()
            return float(stamp) - spawned, int(iteration)
    return None, None


#: The ways the learner can be fed, as ``offline_data`` options.
FEEDS = {
    "materialized": {},
    "epoch_by_epoch": {"materialize_mapped_data": False},
    "repeated_epochs": {"materialize_mapped_data": False, "materialize_data": True},
}
UPDATES_PER_ITERATION = 50


def parquet_files(paths: list[str]) -> list[Path]:
    return [f for p in paths for f in sorted(Path(p).rglob("*.parquet"))]


def parquet_decode_rows_per_s(paths: list[str]) -> float:
    """pyarrow's decode rate of the dataset's Parquet files (best of 3)."""
    import pyarrow.parquet as pq
    import ray.data  # noqa: F401 - registers Ray's tensor extension types

    files = parquet_files(paths)
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        rows = sum(pq.read_table(f).num_rows for f in files)
        best = max(best, rows / (time.perf_counter() - started))
    return best


def bare_torch_update_ms(config, spaces: tuple, batch: dict, updates: int = 200,
                         device: str = "cpu") -> float:
    """Median ms of forward + BC loss + backward + Adam step on ready tensors, nothing else,
    for ``config``'s module on ``spaces`` (observation, action), on ``device`` (each update
    ends with ``loss.item()``, which waits for a GPU to finish)."""
    import torch

    module = config.get_rl_module_spec(*spaces).build().to(device)
    optimizer = torch.optim.Adam(module.parameters(), lr=config.lr)
    obs = torch.from_numpy(batch["obs"]).to(device)
    actions = torch.from_numpy(batch["actions"]).to(device)
    dist_cls = module.get_train_action_dist_cls()
    times = []
    for _ in range(updates):
        started = time.perf_counter()
        logits = module.forward_train({"obs": obs})["action_dist_inputs"]
        loss = -dist_cls.from_logits(logits).logp(actions).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times[updates // 4:])


def data_only(stream, batch_size: int, batches: int) -> tuple[float, float, float]:
    """(rows/s, median ms per batch, worst ms for a batch crossing an epoch boundary) of a
    learner's stream."""
    stats = stream.stats
    stream.next_batch(batch_size)
    times, boundary = [], []
    started = time.perf_counter()
    for _ in range(batches):
        epochs = stats.epochs_completed
        t0 = time.perf_counter()
        batch = stream.next_batch(batch_size)
        elapsed = time.perf_counter() - t0
        (boundary if stats.epochs_completed != epochs else times).append(elapsed)
    rows = batches * len(batch["obs"])
    worst_boundary = 1000 * max(boundary) if boundary else float("nan")
    return rows / (time.perf_counter() - started), 1000 * statistics.median(times), worst_boundary


def min_median(values: list[float], digits: int) -> list[float]:
    return [round(min(values), digits), round(statistics.median(values), digits)]


def streaming_figures(config, input_: str, runs: int) -> dict:
    """``{feed: {"train_env_steps_per_s": [min, median], "epoch_boundary_max_ms": [...]}}``
    for each of ``FEEDS`` on ``input_``."""
    import pyarrow.parquet as pq

    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in parquet_files([input_]))
    batch = config.train_batch_size_per_learner
    figures = {}
    for feed, options in FEEDS.items():
        rates, stalls = [], []
        for _ in range(runs):
            algo = config.copy().offline_data(
                input_=input_, dataset_num_iters_per_learner=UPDATES_PER_ITERATION,
                **options).build()
            for _ in range(3):
                algo.train()
            started = time.perf_counter()
            for _ in range(20):
                algo.train()
            rates.append(20 * UPDATES_PER_ITERATION * batch / (time.perf_counter() - started))
            stalls.append(data_only(algo.learner_group.stream, batch, 2 * rows // batch + 2)[2])
            algo.stop()
        figures[feed] = {"train_env_steps_per_s": min_median(rates, 0),
                         "epoch_boundary_max_ms": min_median(stalls, 1)}
    return {"rows": rows, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/bc_cartpole.yaml"))
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--streaming-inputs", nargs="*", default=None,
                        help="inputs to compare the feeds on (default: the config's)")
    parser.add_argument("--streaming-runs", type=int, default=3)
    args = parser.parse_args()
    seconds_to_450, iterations_to_450 = time_to_return(args.config, 2000)

    import ray

    from offline_rl.algorithms.algorithm_config import AlgorithmConfig

    ray.init(include_dashboard=False)
    config = AlgorithmConfig.from_yaml(args.config).evaluation(evaluation_interval=None)
    started = time.perf_counter()
    algo = config.build()
    build_s = time.perf_counter() - started
    built = time.perf_counter()
    algo.train()
    first_update_s = time.perf_counter() - built
    for _ in range(20):
        algo.train()
    iteration_times = []
    steady_started = time.perf_counter()
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        algo.train()
        iteration_times.append(time.perf_counter() - t0)
    steady_s = time.perf_counter() - steady_started
    stream, batch_size = algo.learner_group.stream, algo.config.train_batch_size_per_learner
    bare_ms = bare_torch_update_ms(algo.config, (algo.observation_space, algo.action_space),
                                   stream.next_batch(batch_size))
    data_rows_per_s, data_batch_ms, boundary_ms = data_only(stream, batch_size, 3000)
    paths = algo.offline_data.paths
    algo.stop()
    streaming = {}
    for input_ in args.streaming_inputs or [config.input_]:
        figures = streaming_figures(config, input_, args.streaming_runs)
        streaming[figures.pop("rows")] = figures
    ray.shutdown()
    steady_ms = 1000 * statistics.median(iteration_times)
    print(json.dumps({
        "build_s": round(build_s, 2),
        "first_update_s": round(first_update_s, 2),
        "steady_iter_ms": round(steady_ms, 3),
        "bare_torch_update_ms": round(bare_ms, 3),
        "steady_over_bare": round(steady_ms / bare_ms, 3),
        "env_steps_per_s": round(args.iterations * config.train_batch_size_per_learner / steady_s),
        "data_only_env_steps_per_s": round(data_rows_per_s),
        "data_only_batch_ms": round(data_batch_ms, 4),
        "epoch_boundary_max_ms": round(boundary_ms, 2),
        "streaming": streaming,
        "parquet_decode_rows_per_s": round(parquet_decode_rows_per_s(paths)),
        "time_to_return_450_s": None if seconds_to_450 is None else round(seconds_to_450, 2),
        "iterations_to_return_450": iterations_to_450,
        "train_batch_size_per_learner": config.train_batch_size_per_learner,
    }))


if __name__ == "__main__":
    main()
