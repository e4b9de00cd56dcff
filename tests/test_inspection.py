"""Dataset inspection: format detection, episode counts and return statistics, plots."""

from __future__ import annotations

import json
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from offline_rl.codec import unpack_episode_state
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.inspection import inspect_dataset, plot_returns

FIXTURES = Path(__file__).parent / "fixtures"
TABULAR = FIXTURES / "rllib_cartpole_tabular"
EPISODES = FIXTURES / "rllib_cartpole_episodes"
SAMPLE_BATCHES = FIXTURES / "rllib_cartpole_sample_batch_json"


def check_statistics(summary: dict, returns: list[float], steps: int) -> None:
    """The summary's statistics against independently computed per-episode returns."""
    assert sorted(summary["returns"]) == pytest.approx(sorted(returns))
    assert summary["episodes"] == len(returns)
    assert summary["steps"] == steps
    assert summary["episode_return_mean"] == pytest.approx(np.mean(returns))
    assert summary["episode_return_std"] == pytest.approx(np.std(returns))
    assert (summary["episode_return_min"], summary["episode_return_max"]) == (min(returns),
                                                                             max(returns))
    assert summary["episode_len_mean"] == pytest.approx(steps / len(returns))


def test_rllib_tabular_recording():
    returns, done = defaultdict(float), defaultdict(bool)
    files = sorted(TABULAR.rglob("*.parquet"))
    rows = [row for file in files for row in pq.read_table(file).to_pylist()]
    for row in rows:
        returns[row["eps_id"]] += row["rewards"]
        done[row["eps_id"]] |= row["terminateds"] or row["truncateds"]
    summary = inspect_dataset(str(TABULAR))
    assert (summary["path"], summary["format"], summary["files"]) == (str(TABULAR), "tabular",
                                                                       len(files))
    assert summary["schema"]["eps_id"] == "string" and summary["schema"]["rewards"] == "double"
    check_statistics(summary, list(returns.values()), len(rows))
    assert summary["episodes"] == len({row["eps_id"] for row in rows}) == 11
    assert summary["incomplete_episodes"] == sum(not flag for flag in done.values()) == 1


def test_rllib_episodes_recording():
    returns, steps = [], 0
    files = sorted(EPISODES.rglob("*.parquet"))
    for file in files:
        for item in pq.read_table(file).column("item").to_pylist():
            rewards = unpack_episode_state(item)["rewards"]["data"]  # no lookback in recordings
            returns.append(float(np.sum(rewards)))
            steps += len(rewards)
    summary = inspect_dataset(str(EPISODES))
    assert (summary["format"], summary["files"], summary["schema"]) == ("episodes", len(files),
                                                                         {"item": "binary"})
    check_statistics(summary, returns, steps)
    assert summary["episodes"] == 20 and summary["incomplete_episodes"] == 0


def test_multi_agent_episodes_count_each_agents_episode(tmp_path):
    from offline_rl.datasets import make_dataset

    card = make_dataset("AlternatingCartPole", tmp_path / "turns", tier="random", episodes=3,
                        write_episodes=True, progress=False)
    summary = inspect_dataset(str(tmp_path / "turns"))
    assert summary["schema"] == {"item": "binary", "agent_ids": "list<element: string>"}
    assert summary["episodes"] == 2 * 3 and summary["steps"] == card["num_env_steps"]
    assert summary["incomplete_episodes"] == 0


def test_rllib_legacy_json_recording():
    lines = [json.loads(line) for file in sorted(SAMPLE_BATCHES.glob("*.json"))
             for line in file.read_text().splitlines()]
    summary = inspect_dataset(str(SAMPLE_BATCHES))
    assert (summary["format"], summary["files"]) == ("sample_batch_json", 1)
    assert summary["schema"]["obs"] == "string" and summary["schema"]["type"] == "string"
    check_statistics(summary, [sum(line["rewards"]) for line in lines],
                     sum(len(line["rewards"]) for line in lines))
    assert summary["episodes"] == len(lines) == 30


def test_json_fragments_count_as_one_episode_and_lines_without_ids_as_their_own(tmp_path):
    lines = [
        {"eps_id": [3, 3, 4], "rewards": [1.0, 2.0, 5.0], "dones": [False, False, True]},
        {"eps_id": [3], "rewards": [4.0], "dones": [True]},
        {"rewards": [0.5, 0.5], "terminateds": [False, False], "truncateds": [False, True]},
    ]
    (tmp_path / "batches.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    summary = inspect_dataset(str(tmp_path))
    check_statistics(summary, [7.0, 5.0, 1.0], steps=6)
    assert summary["incomplete_episodes"] == 0


def test_only_data_files_count(tmp_path):
    for file in sorted(TABULAR.rglob("*.parquet"))[:30]:
        shutil.copy(file, tmp_path / file.name)
    (tmp_path / "dataset.json").write_text(json.dumps({"env": "CartPole-v1"}))
    (tmp_path / ".part-00000.parquet.tmp").write_bytes(b"partial")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / "README.md").write_text("notes")
    summary = inspect_dataset(str(tmp_path))
    assert (summary["format"], summary["files"], summary["steps"]) == ("tabular", 30, 30)


def test_pyarrow_filesystem_gives_the_same_summary():
    subtree = pafs.SubTreeFileSystem(str(FIXTURES), pafs.LocalFileSystem())
    for folder in (TABULAR, EPISODES, SAMPLE_BATCHES):
        local, remote = inspect_dataset(str(folder)), inspect_dataset(folder.name,
                                                                      filesystem=subtree)
        assert {**remote, "path": None} == {**local, "path": None}


def test_tabular_without_episode_ids_counts_steps_only(tmp_path):
    pq.write_table(pa.table({"obs": [[0.0], [1.0]], "rewards": [1.0, 2.0]}),
                   tmp_path / "rows.parquet")
    summary = inspect_dataset(str(tmp_path))
    assert (summary["format"], summary["steps"], summary["episodes"]) == ("tabular", 2, None)
    assert summary["returns"] == [] and summary["episode_return_mean"] is None


def test_mixed_formats_need_a_read_method(tmp_path):
    shutil.copy(next(TABULAR.rglob("*.parquet")), tmp_path / "rows.parquet")
    shutil.copy(next(SAMPLE_BATCHES.glob("*.json")), tmp_path / "batches.json")
    with pytest.raises(DataFormatError, match=r"holds 1 Parquet and 1 JSON files; pass "
                                              r"input_read_method='read_parquet' or 'read_json'"):
        inspect_dataset(str(tmp_path))
    assert inspect_dataset(str(tmp_path), input_read_method="read_json")["episodes"] == 30
    assert inspect_dataset(str(tmp_path), input_read_method="read_parquet")["steps"] == 1
    with pytest.raises(ConfigError, match=r"input_read_method='read_csv' cannot be inspected"):
        inspect_dataset(str(tmp_path), input_read_method="read_csv")


def test_missing_or_empty_paths_are_clear_errors(tmp_path):
    missing = tmp_path / "no-such-dataset"
    with pytest.raises(FileNotFoundError, match=rf"'{missing}' does not exist"):
        inspect_dataset(str(missing))
    with pytest.raises(DataFormatError, match=r"no data files \(\*\.parquet, \*\.json, "
                                              r"\*\.jsonl\) under"):
        inspect_dataset(str(tmp_path))
    (tmp_path / "bad.json").write_text('{"rewards": [1.0]}\nnot json\n')
    with pytest.raises(DataFormatError, match=r"bad\.json, line 2: not valid JSON"):
        inspect_dataset(str(tmp_path))


def test_plot_returns_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "returns.png"
    plot_returns(inspect_dataset(str(EPISODES))["returns"], str(target), "CartPole episodes")
    assert target.read_bytes().startswith(b"\x89PNG")


def test_plot_returns_without_matplotlib_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install 'offline-rl\[plot\]'"):
        plot_returns([1.0, 2.0], str(tmp_path / "returns.png"), "returns")


def test_observations_outside_the_space_are_counted_in_every_format(tmp_path):
    """Issue 17: x1e30 observations used to pass unnoticed; with the env's spaces, inspection
    counts them (RLlib's recordings hold none)."""
    import gymnasium as gym

    space = gym.make("CartPole-v1").observation_space
    assert inspect_dataset(str(TABULAR), observation_space=space)[
        "observations_out_of_bounds"] == 0
    table = pa.concat_tables(pq.read_table(file) for file in sorted(TABULAR.rglob("*.parquet")))
    observations = np.zeros((len(table), 4), np.float32)
    observations[[2, 5], 0] = 1e30
    pq.write_table(table.set_column(table.schema.get_field_index("obs"), "obs",
                                    pa.array(observations.tolist(), pa.list_(pa.float32()))),
                   tmp_path / "part.parquet")
    assert inspect_dataset(str(tmp_path), observation_space=space)[
        "observations_out_of_bounds"] == 2
    assert inspect_dataset(str(EPISODES), observation_space=space)[
        "observations_out_of_bounds"] == 0
    assert inspect_dataset(str(SAMPLE_BATCHES), observation_space=space)[
        "observations_out_of_bounds"] == 0
