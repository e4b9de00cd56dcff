"""Mixing overhead: steady-iteration rows/s of BC on one source beside the same rows split into
two sources mixed 50/50 (``offline_data(input_={a: 0.5, b: 0.5})``), in the same process.

Prints one JSON line: each run's rows/s over ``--iterations`` steady iterations (after one
warm-up iteration: its first batches wait for the pipeline; the two runs' iterations
alternate), their min and median, and ``overhead_pct``: how much slower the mix's median is
than the single source's (target <= 10). Then ``compose_us_per_batch``: the cost of handing
out one batch from one stream and from a mix of two, in memory (no Ray), and
``compose_overhead_pct``: the mixing's own overhead, which a loaded machine does not blur as
it does whole iterations.

    PYTHONPATH=. python benchmarks/mixing.py [--episodes 40] [--batch-size 1024] [--iterations 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq


def build(input_, batch_size: int, updates: int):
    """BC on ``input_``, built (its data materialized), one warm-up iteration trained."""
    from offline_rl import BCConfig

    algo = (BCConfig().environment("CartPole-v1")
            .training(train_batch_size_per_learner=batch_size)
            .offline_data(input_=input_, dataset_num_iters_per_learner=updates)
            .debugging(seed=0)).build()
    algo.train()  # warm-up: the pipeline starts
    return algo


def rows_per_s(algo) -> float:
    """Rows/s of one steady iteration."""
    result = algo.train()
    return result["learners"]["__all_modules__"]["num_env_steps_trained"] / result[
        "time_this_iter_s"]


def compose_us_per_batch(batch_size: int, batches: int = 500) -> tuple[float, float]:
    """Microseconds per batch handed out by one ``BatchStream`` and by a ``MixedStream`` of two,
    on in-memory columns (the mixing's own cost, without Ray: steady under load)."""
    import numpy as np

    from offline_rl.data.feed.batch_stream import BatchStream
    from offline_rl.data.feed.mixed_stream import MixedStream

    rows, rng = 200_000, np.random.default_rng(0)
    columns = {"obs": rng.random((rows, 4), np.float32),
               "new_obs": rng.random((rows, 4), np.float32),
               "actions": np.zeros(rows, np.int64), "rewards": np.ones(rows, np.float32)}
    fetch = 8 * batch_size

    def chunks(data: dict, epoch: int) -> list[dict]:
        return [{name: column[i:i + fetch] for name, column in data.items()}
                for i in range(0, rows, fetch)]

    figures = []
    for stream in (BatchStream(lambda: columns, chunks).start(),
                   MixedStream([BatchStream(lambda: columns, chunks).start() for _ in range(2)],
                               [0.5, 0.5], ["a", "b"], seed=0)):
        stream.next_batch(batch_size)
        started = time.perf_counter()
        for _ in range(batches):
            stream.next_batch(batch_size)
        figures.append((time.perf_counter() - started) / batches * 1e6)
        stream.stop()
    return figures[0], figures[1]


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
        # Both built side by side and their iterations alternated, so that both see the
        # same load on a shared machine.
        algos = [build(str(whole), args.batch_size, args.updates),
                 build({str(half): 0.5 for half in halves}, args.batch_size, args.updates)]
        try:
            pairs = [[rows_per_s(algo) for algo in algos] for _ in range(args.iterations)]
        finally:
            for algo in reversed(algos):  # the first started Ray, and stops it
                algo.stop()
    one, mixed = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    figures = {"benchmark": "mixing", "rows": table.num_rows, "batch_size": args.batch_size,
               "one_source_rows_per_s": {"min": min(one), "median": statistics.median(one)},
               "two_sources_rows_per_s": {"min": min(mixed), "median": statistics.median(mixed)},
               "overhead_pct": 100 * (1 - statistics.median(mixed) / statistics.median(one))}
    one_us, mixed_us = compose_us_per_batch(args.batch_size)
    figures.update(compose_us_per_batch={"one": one_us, "mixed": mixed_us},
                   compose_overhead_pct=100 * (mixed_us / one_us - 1))
    print(json.dumps({key: ({k: round(v) for k, v in value.items()} if isinstance(value, dict)
                            else round(value, 1) if isinstance(value, float) else value)
                      for key, value in figures.items()}))


if __name__ == "__main__":
    main()
