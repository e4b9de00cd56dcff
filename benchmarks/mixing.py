"""Mixing overhead: steady-iteration rows/s of BC on one source beside the same rows split into
two sources mixed 50/50 (``offline_data(input_={a: 0.5, b: 0.5})``), in the same process.

Prints one JSON line: each run's rows/s over ``--iterations`` steady iterations (after one
warm-up iteration: its first batches wait for the pipeline), their min and median, and
``overhead_pct``: how much slower the mix's median is than the single source's (target <= 10).

    PYTHONPATH=. python benchmarks/mixing.py [--episodes 40] [--batch-size 1024] [--iterations 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import pyarrow.parquet as pq


def steady_rows_per_s(input_, batch_size: int, updates: int, iterations: int) -> list[float]:
    """Rows/s of each steady iteration of BC on ``input_``."""
    from offline_rl import BCConfig

    config = (BCConfig().environment("CartPole-v1")
              .training(train_batch_size_per_learner=batch_size)
              .offline_data(input_=input_, dataset_num_iters_per_learner=updates)
              .debugging(seed=0))
    with config.build() as algo:
        algo.train()  # warm-up: the pipeline starts
        results = [algo.train() for _ in range(iterations)]
    return [result["learners"]["__all_modules__"]["num_env_steps_trained"]
            / result["time_this_iter_s"] for result in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--updates", type=int, default=50, help="updates per iteration")
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    from offline_rl.datasets import make_dataset

    with tempfile.TemporaryDirectory() as tmp:
        whole, halves = Path(tmp) / "whole", [Path(tmp) / "a", Path(tmp) / "b"]
        make_dataset("CartPole-v1", whole, tier="expert", episodes=args.episodes, seed=0,
                     progress=False)
        table = pq.ParquetDataset(sorted(str(path) for path in whole.rglob("*.parquet"))).read()
        for index, half in enumerate(halves):
            half.mkdir()
            rows = table.num_rows // 2
            pq.write_table(table.slice(index * rows, rows), half / "part-0.parquet")
        one = steady_rows_per_s(str(whole), args.batch_size, args.updates, args.iterations)
        mixed = steady_rows_per_s({str(half): 0.5 for half in halves}, args.batch_size,
                                  args.updates, args.iterations)
    figures = {"benchmark": "mixing", "rows": table.num_rows, "batch_size": args.batch_size,
               "one_source_rows_per_s": {"min": min(one), "median": statistics.median(one)},
               "two_sources_rows_per_s": {"min": min(mixed), "median": statistics.median(mixed)},
               "overhead_pct": 100 * (1 - statistics.median(mixed) / statistics.median(one))}
    print(json.dumps({key: ({k: round(v) for k, v in value.items()} if isinstance(value, dict)
                            else round(value, 1) if isinstance(value, float) else value)
                      for key, value in figures.items()}))


if __name__ == "__main__":
    main()
