"""Streaming data rate: our pipeline beside plain Ray Data and the PreLearners alone, same files.

Records (once, under ``--data``) a CartPole expert dataset of ``--rows`` rows in both formats,
tabular and episodes (100k rows per file), then measures in one Ray instance, data only (no
learner), env steps (rows) per second:

* ``ray_data_plain``: the ceilings, plain Ray Data on the tabular files: ``read_parquet`` ->
  ``map_batches`` on a one-actor pool returning its numpy batch -> ``iter_batches`` of the
  train batch size, measured after the first batch: ``one_pass`` over the rest of one
  ``iter_batches`` pass, and ``pass_per_epoch`` over the rest of the first pass and a second
  one (an execution of its own, its actor started again, as every epoch needs in plain Ray
  Data);
* ours, per format, per feed: ``epoch_by_epoch`` (``materialize_mapped_data=False``: each epoch
  one Ray Data execution, held to ``pass_per_epoch``) and ``repeated_epochs``
  (``materialize_data=True`` too: the raw rows materialized once, many epochs per execution,
  held to ``one_pass``); two epochs after the first batch, the epoch boundary included, with
  the PreLearner pool Ray's defaults give (one actor on 2 CPUs);
* ``prelearner_in_process``: our ``OfflinePreLearner`` called in this process on in-memory
  tables, in the calls Ray Data makes (``benchmarks/formats.py``'s measure);
* with ``--rllib-python`` (a Python with ``ray[rllib]``: never our dependency), RLlib's own
  ``OfflinePreLearner`` called in this process in 8,192-row calls, on the tabular files' first
  ``--rllib-rows`` rows.

Prints one JSON line: [min, median] of ``--runs`` runs of each, and each of our streaming rates
as a share of its plain Ray Data ceiling's median.

    python benchmarks/pipeline.py [--rows 2000000] [--runs 3] [--rllib-python .venv/bin/python]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from formats import prelearner_steps_per_s

FEEDS = {"epoch_by_epoch": {"materialize_mapped_data": False},
         "repeated_epochs": {"materialize_data": True, "materialize_mapped_data": False}}
SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
ROWS_PER_FILE = 100_000
EPOCHS_MEASURED = 2
#: Each feed's ceiling: plain Ray Data's ``iter_batches`` passes over as many epochs.
PLAIN_PASSES = {"epoch_by_epoch": ("pass_per_epoch", EPOCHS_MEASURED),
                "repeated_epochs": ("one_pass", 1)}

RLLIB_CHILD = """
import json, sys, time
import gymnasium as gym, numpy as np, pyarrow as pa, pyarrow.parquet as pq
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.offline.offline_prelearner import OfflinePreLearner

files, rows, batch_size = json.loads(sys.argv[1])
table = pa.concat_tables(pq.read_table(f) for f in files).slice(0, rows)
spaces = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
config = (BCConfig().environment(observation_space=spaces[0], action_space=spaces[1])
          .training(train_batch_size_per_learner=batch_size).offline_data(input_=files))
module_spec = config.get_multi_rl_module_spec(spaces={"default_policy": spaces})
prelearner = OfflinePreLearner(config=config.rl_module(rl_module_spec=module_spec), spaces=spaces)
call_rows = 8192
batches = []
for offset in range(0, table.num_rows, call_rows):
    part = table.slice(offset, call_rows)
    batches.append({name: np.stack(part.column(name).to_numpy(zero_copy_only=False))
                    if name in ("obs", "new_obs") else part.column(name).to_numpy()
                    for name in part.column_names})
started = time.perf_counter()
for batch in batches:
    prelearner(batch)
print(json.dumps({"rows_per_s": table.num_rows / (time.perf_counter() - started)}))
"""


def dataset(root: Path, rows: int, write_episodes: bool) -> Path:
    """The CartPole expert dataset of ``rows`` rows in one format, recorded if absent."""
    from offline_rl.datasets import make_dataset

    folder = root / f"cartpole-{rows}-{'episodes' if write_episodes else 'tabular'}"
    if not folder.exists():
        make_dataset("CartPole-v1", folder, tier="expert", episodes=max(1, rows // 500),
                     seed=0, write_episodes=write_episodes, max_rows_per_file=ROWS_PER_FILE)
    return folder


def parquet_files(folder: Path) -> list[str]:
    return sorted(str(path) for path in folder.rglob("*.parquet")
                  if ".offline-rl" not in path.parts)


class NumpyBatch:
    """Plain Ray Data's map: the numpy batch Ray Data converted, returned as it is."""

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return batch


def plain_ray_data_rows_per_s(files: list[str], batch_size: int, passes: int) -> float:
    """Rows/s of plain Ray Data over the files after the first batch: the rest of the first
    ``iter_batches`` pass and ``passes - 1`` more, each an execution of its own."""
    import ray.data

    dataset = ray.data.read_parquet(files).map_batches(
        NumpyBatch, compute=ray.data.ActorPoolStrategy(size=1), num_cpus=1,
        batch_format="numpy")
    first = iter(dataset.iter_batches(batch_size=batch_size, batch_format="numpy"))
    next(first)
    started, rows = time.perf_counter(), 0
    later = (dataset.iter_batches(batch_size=batch_size, batch_format="numpy")
             for _ in range(passes - 1))
    for batch in itertools.chain(first, itertools.chain.from_iterable(later)):
        rows += len(batch["obs"])
    return rows / (time.perf_counter() - started)


def config_for(folder: Path, episodes: bool, feed: dict, batch_size: int):
    from offline_rl import BCConfig

    return (BCConfig().environment("CartPole-v1")
            .training(train_batch_size_per_learner=batch_size)
            .offline_data(input_=str(folder), input_read_episodes=episodes, **feed)
            .debugging(seed=0))


def our_rows_per_s(config) -> float:
    """Rows/s of ``OfflineData.sample()`` over two epochs after the first batch (so the epoch
    boundary is in it), up to the second epoch's end (not waiting for the third's rows)."""
    from offline_rl import OfflineData

    data = OfflineData(config, SPACES).start()
    try:
        data.sample()
        started, rows, ends = time.perf_counter(), 0, 0
        while ends < EPOCHS_MEASURED:
            batch = data.sample(stop_at_epoch_end=True)
            if batch is None:
                ends += 1
            else:
                rows += len(batch["obs"])
        return rows / (time.perf_counter() - started)
    finally:
        data.stop()


def rllib_rows_per_s(python: str, files: list[str], rows: int, batch_size: int) -> float:
    child = subprocess.run([python, "-c", RLLIB_CHILD, json.dumps([files, rows, batch_size])],
                           capture_output=True, text=True)
    if child.returncode != 0:
        raise RuntimeError(f"RLlib's OfflinePreLearner failed in {python}:\n"
                           f"{child.stderr[-2000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])["rows_per_s"]


def min_median(values: list[float]) -> list[int]:
    return [round(min(values)), round(statistics.median(values))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path("data/pipeline"))
    parser.add_argument("--rllib-python", default=None, metavar="PYTHON")
    parser.add_argument("--rllib-rows", type=int, default=100_000)
    args = parser.parse_args()

    import ray
    import ray.data

    folders = {"tabular": dataset(args.data, args.rows, write_episodes=False),
               "episodes": dataset(args.data, args.rows, write_episodes=True)}
    ray.init(include_dashboard=False, logging_level="ERROR")
    ray.data.DataContext.get_current().enable_progress_bars = False
    tabular_files = parquet_files(folders["tabular"])
    plain = {name: min_median([plain_ray_data_rows_per_s(tabular_files, args.batch_size, passes)
                               for _ in range(args.runs)])
             for name, passes in PLAIN_PASSES.values()}
    ours, in_process = {}, {}
    for name, folder in folders.items():
        episodes = name == "episodes"
        ours[name] = {feed: min_median([
            our_rows_per_s(config_for(folder, episodes, options, args.batch_size))
            for _ in range(args.runs)]) for feed, options in FEEDS.items()}
        config = config_for(folder, episodes, FEEDS["epoch_by_epoch"], args.batch_size)
        in_process[name] = round(prelearner_steps_per_s(config, folder, name, SPACES))
    ray.shutdown()
    figures = {
        "rows": args.rows, "batch_size": args.batch_size, "runs": args.runs,
        "ray_data_plain_rows_per_s": plain, "ours_rows_per_s": ours,
        "ours_over_plain_median": {
            name: {feed: round(rates[1] / plain[PLAIN_PASSES[feed][0]][1], 3)
                   for feed, rates in feeds.items()}
            for name, feeds in ours.items()},
        "prelearner_in_process_rows_per_s": in_process,
    }
    if args.rllib_python:
        figures["rllib_prelearner_in_process_rows_per_s"] = round(rllib_rows_per_s(
            args.rllib_python, tabular_files, args.rllib_rows, args.batch_size))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
