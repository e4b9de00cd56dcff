"""Converting tabular Parquet into episodes (``offline-rl convert``): seconds per conversion,
beside plain Ray Data grouping the same rows by episode id.

Two inputs: RLlib's own CartPole recording (``tests/fixtures/rllib_cartpole_tabular``, 200
small files written by RLlib's recording env runner) and a recording of ``--episodes``
CartPole ``medium`` episodes (``offline-rl datasets make``'s tabular writer, ``--rows-per-file``
rows per file). For each, [min, median] of ``--runs``:

- ``convert_s``: ``tabular_to_episodes`` (read, group by ``eps_id``, order each episode, build
  and write the episodes, into a new folder each run);
- ``ray_data_groupby_s`` (the ceiling): ``read_parquet`` -> ``groupby("eps_id")`` ->
  ``map_groups`` returning each group as it is -> ``materialize``, with Ray Data's default
  shuffle; ``ray_data_sorted_groupby_s``: the same grouped by a sort in Ray tasks
  (``SORT_SHUFFLE_PULL_BASED``), as ``convert`` groups an input that fits one partition.

Prints one JSON line per input; each run's figures on stderr as they come.

    python benchmarks/convert.py [--episodes 200] [--rows-per-file 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bc_cartpole import min_median, parquet_files

RLLIB_RECORDING = Path(__file__).resolve().parents[1] / "tests/fixtures/rllib_cartpole_tabular"


def seconds(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def ray_data_groupby(path: str, strategy) -> None:
    import ray.data

    dataset = ray.data.read_parquet(path)
    if strategy is not None:
        dataset.context.shuffle_strategy = strategy
    dataset.groupby("eps_id").map_groups(lambda group: group, batch_format="pyarrow").materialize()


def figures(path: str, runs: int) -> dict:
    import pyarrow.parquet as pq
    from ray.data.context import ShuffleStrategy

    from offline_rl.recording.convert import tabular_to_episodes

    files = parquet_files([path])
    timed: dict[str, list[float]] = {"convert_s": [], "ray_data_groupby_s": [],
                                     "ray_data_sorted_groupby_s": []}
    with tempfile.TemporaryDirectory() as out:
        for run in range(runs + 1):  # the first run of each warms Ray's worker processes up
            times = {
                "convert_s": seconds(partial(tabular_to_episodes, path, f"{out}/run-{run}")),
                "ray_data_groupby_s": seconds(partial(ray_data_groupby, path, None)),
                "ray_data_sorted_groupby_s": seconds(partial(
                    ray_data_groupby, path, ShuffleStrategy.SORT_SHUFFLE_PULL_BASED)),
            }
            print(f"{Path(path).name} run {run}: {times}", file=sys.stderr, flush=True)
            if run:
                for name, value in times.items():
                    timed[name].append(value)
    return {"files": len(files), "rows": sum(pq.read_metadata(file).num_rows for file in files),
            **{name: min_median(values, 2) for name, values in timed.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--rows-per-file", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import ray

    from offline_rl.datasets import make_dataset

    ray.init(include_dashboard=False, logging_level="ERROR")
    with tempfile.TemporaryDirectory() as folder:
        recorded = f"{folder}/cartpole-medium"
        make_dataset("CartPole-v1", recorded, tier="medium", episodes=args.episodes, seed=0,
                     max_rows_per_file=args.rows_per_file, progress=False)
        for name, path in (("rllib_cartpole_recording", str(RLLIB_RECORDING)),
                           (f"cartpole_medium_{args.episodes}_episodes", recorded)):
            print(json.dumps({"input": name, "cpus": ray.cluster_resources()["CPU"],
                              **figures(path, args.runs)}), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
