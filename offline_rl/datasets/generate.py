"""Recording a behaviour policy in a gymnasium env to tabular Parquet, with a dataset card."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from offline_rl.datasets.experts import EXPERTS, EpsilonGreedy

CARD_FILE = "dataset.json"
GENERATOR_VERSION = 1


def make_dataset(env_id: str, out: str | Path, *, episodes: int = 100, epsilon: float = 0.1,
                 seed: int = 0, rows_per_file: int = 25_000, progress: bool = True
                 ) -> dict[str, Any]:
    """Records ``episodes`` episodes of the env's scripted expert with ``epsilon`` random actions
    to tabular Parquet under ``out`` and writes the dataset card; returns the card.

    Deterministic given ``seed``. Files are written to a temporary folder and renamed into place;
    the card (``dataset.json``) is written last, so its presence means the dataset is complete.
    """
    if env_id not in EXPERTS:
        raise ValueError(f"no scripted expert for {env_id!r}; available: {sorted(EXPERTS)}")
    expert, num_actions = EXPERTS[env_id]
    policy = EpsilonGreedy(expert, num_actions, epsilon, seed)
    env = gym.make(env_id)
    id_rng = np.random.default_rng(seed + 1)
    columns: dict[str, list] = {name: [] for name in (
        "eps_id", "obs", "actions", "rewards", "new_obs", "terminateds", "truncateds", "t",
        "action_logp", "action_dist_inputs")}
    returns = []
    for episode in tqdm(range(episodes), desc=f"recording {env_id}", unit="episode",
                        disable=not progress):
        eps_id = uuid.UUID(bytes=id_rng.bytes(16)).hex
        obs, _ = env.reset(seed=seed + episode)
        done, t, episode_return = False, 0, 0.0
        while not done:
            action, logp = policy(obs)
            new_obs, reward, terminated, truncated, _ = env.step(action)
            for name, value in (("eps_id", eps_id), ("obs", obs), ("actions", action),
                                ("rewards", reward), ("new_obs", new_obs),
                                ("terminateds", terminated), ("truncateds", truncated),
                                ("t", t), ("action_logp", logp[action]),
                                ("action_dist_inputs", logp)):
                columns[name].append(value)
            obs, t, episode_return = new_obs, t + 1, episode_return + float(reward)
            done = terminated or truncated
        returns.append(episode_return)
    env.close()
    table = _to_table(columns)
    card = {
        "env": env_id,
        "policy": f"scripted expert, epsilon={epsilon} random actions",
        "format": "tabular",
        "episodes": episodes,
        "steps": table.num_rows,
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "return_min": float(np.min(returns)),
        "return_max": float(np.max(returns)),
        "epsilon": epsilon,
        "seed": seed,
        "generator_version": GENERATOR_VERSION,
    }
    _write(table, Path(out), rows_per_file, card)
    return card


def _to_table(columns: dict[str, list]) -> pa.Table:
    from ray.data.extensions import ArrowTensorArray

    arrays: dict[str, Any] = {}
    for name, values in columns.items():
        array = np.asarray(values)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        arrays[name] = ArrowTensorArray.from_numpy(array) if array.ndim > 1 else array
    arrays["agent_id"] = pa.nulls(len(columns["eps_id"]))
    arrays["module_id"] = pa.nulls(len(columns["eps_id"]))
    return pa.table(arrays)


def _write(table: pa.Table, out: Path, rows_per_file: int, card: dict[str, Any]) -> None:
    staging = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for part, start in enumerate(range(0, table.num_rows, rows_per_file)):
        pq.write_table(table.slice(start, rows_per_file), staging / f"part-{part:05d}.parquet")
    (staging / CARD_FILE).write_text(json.dumps(card, indent=2))
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
