"""How soon a bad dataset fails: seconds from ``config.build()`` to the ``DataFormatError``.

Two datasets of 20k CartPole rows: one with a ``rewards`` column of strings (caught by the
driver's check of the first rows, before any Ray work), one with a NaN reward past those rows
(caught by a PreLearner actor in the Ray Data pipeline, the first ``train()``). Beside them, the
ceiling: pyarrow reading the first rows of the file alone. One Ray instance serves all runs;
min/median of ``--runs`` runs each, one JSON line.

    python benchmarks/error_latency.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 20_000


def write_dataset(folder: Path, defect: str) -> Path:
    """CartPole-shaped rows with one defect: string rewards, or a NaN reward in the last row."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(ROWS, 4)).astype(np.float32)
    rewards: list = np.ones(ROWS).tolist()
    if defect == "strings":
        rewards = ["1.0"] * ROWS
    else:
        rewards[-1] = float("nan")
    folder.mkdir(parents=True)
    pq.write_table(pa.table({
        "eps_id": np.repeat(np.arange(ROWS // 500), 500).astype(str),
        "obs": obs.tolist(), "new_obs": obs.tolist(), "actions": rng.integers(0, 2, ROWS),
        "rewards": rewards, "terminateds": np.arange(ROWS) % 500 == 499,
    }), folder / "part.parquet")
    return folder


def seconds_to_error(path: Path) -> float:
    from offline_rl import BCConfig
    from offline_rl.errors import DataFormatError

    config = (BCConfig().environment("CartPole-v1").training(train_batch_size_per_learner=1024)
              .offline_data(input_=str(path), dataset_num_iters_per_learner=1))
    started = time.perf_counter()
    try:
        with config.build() as algo:
            algo.train()
    except DataFormatError:
        return time.perf_counter() - started
    raise AssertionError(f"{path} trained without an error")


def seconds_to_read_first_rows(path: Path) -> float:
    started = time.perf_counter()
    next(pq.ParquetFile(path / "part.parquet").iter_batches(batch_size=256))
    return time.perf_counter() - started


def summary(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    with tempfile.TemporaryDirectory() as root:
        strings = write_dataset(Path(root) / "strings", "strings")
        late_nan = write_dataset(Path(root) / "late-nan", "late-nan")
        seconds_to_error(strings)  # warm imports and the Ray workers
        figures = {
            "benchmark": "error_latency",
            "rows": ROWS,
            "strings_in_first_rows_s": summary([seconds_to_error(strings)
                                                for _ in range(args.runs)]),
            "nan_in_the_pipeline_s": summary([seconds_to_error(late_nan)
                                              for _ in range(args.runs)]),
            "ceiling_pyarrow_first_rows_s": summary([seconds_to_read_first_rows(strings)
                                                     for _ in range(args.runs)]),
            "runs": args.runs,
        }
    ray.shutdown()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
