"""Input formats: PreLearner-path throughput of each format beside its raw decode ceiling.

Writes the CartPole expert dataset (``make demo``'s, recorded if absent) in four formats:
tabular, tabular with compressed ``obs``/``new_obs`` (offline-rl's pickle-free codec), episodes
(msgpack ``item`` column, as RLlib writes) and legacy SampleBatch JSON (one episode per line,
``obs``/``new_obs`` as RLlib's base64 LZ4 pickles). For each it prints one JSON line:

* ``decode_rows_per_s``: the ceiling, pyarrow reading the files (Parquet or JSON) and nothing else;
* ``prelearner_env_steps_per_s``: ``OfflinePreLearner`` on those tables in this process, the work
  one actor does per batch (batch 1024);
* ``pipeline_env_steps_per_s``: the full Ray Data pipeline (read -> actor pool -> exact batches)
  with ``materialize_mapped_data=False``, so every batch is mapped, measured over the first
  epoch after its first batch; ``first_batch_s`` is the wait for that first batch.

    python benchmarks/formats.py [--data data/cartpole-expert] [--batch-size 1024]
"""

from __future__ import annotations

import argparse
import base64
import json
import pickle
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

FORMATS = ("tabular", "tabular_compressed", "episodes", "sample_batch_json")


def write_formats(source: Path, out: Path) -> dict[str, Path]:
    """The source tabular dataset rewritten in every format; returns each format's folder."""
    from offline_rl.codec import pack_episode_state
    from offline_rl.compression import pack_array
    from offline_rl.episodes.episode import SingleAgentEpisode
    from offline_rl.formats.tabular import table_to_numpy

    table = read_parquet(source)
    folders = {name: out / name for name in FORMATS}
    for folder in folders.values():
        folder.mkdir(parents=True)
    pq.write_table(table, folders["tabular"] / "part-0.parquet")
    compressed = table
    for name in ("obs", "new_obs"):
        rows = table.column(name).to_numpy()
        packed = pa.array([pack_array(row) for row in rows], pa.binary())
        compressed = compressed.set_column(compressed.column_names.index(name), name, packed)
    pq.write_table(compressed, folders["tabular_compressed"] / "part-0.parquet")

    columns = table_to_numpy(table, [
        "eps_id", "obs", "new_obs", "actions", "rewards", "terminateds", "truncateds", "t"])
    starts = np.flatnonzero(np.r_[True, columns["eps_id"][1:] != columns["eps_id"][:-1]])
    bounds = list(zip(starts, [*starts[1:], len(columns["t"])], strict=True))
    items, lines = [], []
    for start, end in bounds:
        steps = slice(start, end)
        observations = np.concatenate([columns["obs"][steps], columns["new_obs"][end - 1:end]])
        episode = SingleAgentEpisode(
            str(columns["eps_id"][start]), observations=observations,
            actions=columns["actions"][steps], rewards=columns["rewards"][steps],
            terminated=bool(columns["terminateds"][end - 1]),
            truncated=bool(columns["truncateds"][end - 1]), len_lookback_buffer=0).to_numpy()
        items.append(pack_episode_state(episode.get_state()))
        lines.append(json.dumps({
            "type": "SampleBatch", "eps_id": [len(lines)] * (end - start),
            "t": columns["t"][steps].tolist(), "obs": _rllib_pack(columns["obs"][steps]),
            "new_obs": _rllib_pack(columns["new_obs"][steps]),
            "actions": columns["actions"][steps].tolist(),
            "rewards": columns["rewards"][steps].tolist(),
            "terminateds": columns["terminateds"][steps].tolist(),
            "truncateds": columns["truncateds"][steps].tolist(),
        }))
    pq.write_table(pa.table({"item": pa.array(items, pa.binary())}),
                   folders["episodes"] / "part-0.parquet", row_group_size=16)
    (folders["sample_batch_json"] / "part-0.json").write_text("\n".join(lines) + "\n")
    return folders


def read_parquet(folder: Path) -> pa.Table:
    """Every Parquet file under ``folder`` as one table."""
    return pa.concat_tables(pq.read_table(f) for f in sorted(folder.rglob("*.parquet")))


def _rllib_pack(array: np.ndarray) -> str:
    """RLlib's compressed-column encoding (writing a pickle is safe; reading one is not)."""
    return base64.b64encode(pa.Codec("lz4").compress(pickle.dumps(array), asbytes=True)).decode()


def decode_rows_per_s(folder: Path, name: str) -> float:
    """Best of 3: pyarrow reading the folder's files into memory, rows (timesteps) per second."""
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        if name == "sample_batch_json":
            table = pa_json.read_json(folder / "part-0.json")
            rows = sum(len(t) for t in table.column("t").to_pylist())
        else:
            table = read_parquet(folder)
            rows = (table.num_rows if name.startswith("tabular")
                    else _episode_steps(table))
        best = max(best, rows / (time.perf_counter() - started))
    return best


def _episode_steps(table: pa.Table) -> int:
    """Timesteps in an episodes table, unpacking each msgpack state (the format's decode)."""
    from offline_rl.codec import unpack_episode_state

    return sum(len(unpack_episode_state(item)["actions"]["data"])
               for item in table.column("item").to_pylist())


def config_for(name: str, folder: Path, batch_size: int):
    from offline_rl import BCConfig

    options: dict = {"input_": str(folder), "materialize_mapped_data": False}
    if name == "tabular_compressed":
        options["input_compress_columns"] = ["obs"]
    elif name == "episodes":
        options["input_read_episodes"] = True
    elif name == "sample_batch_json":
        options.update(input_read_sample_batches=True, input_read_method="read_json")
    return (BCConfig().environment("CartPole-v1")
            .training(train_batch_size_per_learner=batch_size)
            .offline_data(**options).debugging(seed=0))


def prelearner_steps_per_s(config, folder: Path, name: str, spaces) -> float:
    """The PreLearner's own rate on in-memory tables, in calls of Ray Data's batch size."""
    from offline_rl import DEFAULT_MODULE_ID, OfflinePreLearner
    from offline_rl.data.prelearner.prelearner import rows_per_call

    if name == "sample_batch_json":
        table = pa_json.read_json(folder / "part-0.json")
        table = table.append_column("path", pa.array(["part-0.json"] * table.num_rows))
    else:
        table = read_parquet(folder)
    rows = rows_per_call(config.data_config(spaces))
    prelearner = OfflinePreLearner(config, spaces)
    best = 0.0
    for _ in range(3):
        started, steps = time.perf_counter(), 0
        for offset in range(0, table.num_rows, rows):
            steps += len(prelearner(table.slice(offset, rows))[f"{DEFAULT_MODULE_ID}/obs"])
        best = max(best, steps / (time.perf_counter() - started))
    return best


def pipeline_steps_per_s(config, spaces) -> tuple[float, float]:
    """(env steps/s over the first epoch after its first batch, seconds to the first batch)."""
    from offline_rl import OfflineData

    data = OfflineData(config, spaces).start()
    try:
        started = time.perf_counter()
        data.sample()
        first_batch_s = time.perf_counter() - started
        stats, steps = data.stream.stats, 0
        started = time.perf_counter()
        while stats.epochs_completed == 0:
            steps += len(data.sample()["obs"])
        return steps / (time.perf_counter() - started), first_batch_s
    finally:
        data.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/cartpole-expert"))
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()

    import gymnasium as gym
    import ray

    from offline_rl.datasets import make_dataset

    if not args.data.exists():
        make_dataset("CartPole-v1", args.data, tier="expert", episodes=100, seed=0,
                     progress=False)
    spaces = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
    ray.init(include_dashboard=False)
    with tempfile.TemporaryDirectory() as scratch:
        folders = write_formats(args.data, Path(scratch))
        for name, folder in folders.items():
            config = config_for(name, folder, args.batch_size)
            pipeline, first_batch_s = pipeline_steps_per_s(config, spaces)
            print(json.dumps({
                "format": name,
                "batch_size": args.batch_size,
                "pipeline_env_steps_per_s": round(pipeline),
                "first_batch_s": round(first_batch_s, 2),
                "prelearner_env_steps_per_s": round(
                    prelearner_steps_per_s(config, folder, name, spaces)),
                "decode_rows_per_s": round(decode_rows_per_s(folder, name)),
            }), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
