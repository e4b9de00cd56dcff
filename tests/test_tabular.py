"""Tabular rows -> train columns: the vectorized path equals the per-episode path."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from connectors import default_learner_pipeline
from offline_rl.columns import SCHEMA
from offline_rl.data.prelearner.call_output import train_columns
from offline_rl.data.prelearner.prelearner import EPISODE_BOOKKEEPING
from offline_rl.formats.tabular import (
    DataFormatError,
    column_to_numpy,
    episode_ends,
    resolve_schema,
    rows_to_episodes,
    rows_to_train_columns,
    table_to_numpy,
    train_column_names,
)

FIXTURES = Path(__file__).parent / "fixtures"

CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


def per_episode_columns(table: pa.Table, schema) -> dict[str, np.ndarray]:
    names = train_column_names(table.column_names, schema)
    names += [name for name in EPISODE_BOOKKEEPING if name in table.column_names]
    episodes = rows_to_episodes(table_to_numpy(table, names), schema, CARTPOLE_OBS,
                                gym.spaces.Discrete(2))
    return default_learner_pipeline()(rl_module=None, batch={}, episodes=episodes)


def vectorized_columns(table: pa.Table, schema) -> dict[str, np.ndarray]:
    rows = table_to_numpy(table, train_column_names(table.column_names, schema))
    return rows_to_train_columns(rows, schema, CARTPOLE_OBS)


def assert_same_columns(left: dict, right: dict) -> None:
    assert sorted(left) == sorted(right)
    for name in left:
        assert left[name].dtype == right[name].dtype, name
        np.testing.assert_array_equal(left[name], right[name], err_msg=name)


@pytest.mark.parametrize("source", ["ours", "rllib_fixture"])
def test_vectorized_path_equals_per_episode_path(source, cartpole_data):
    import ray.data  # noqa: F401 - registers Ray's tensor extension types for pyarrow

    folder = cartpole_data if source == "ours" else FIXTURES / "rllib_cartpole_tabular"
    table = pa.concat_tables(pq.read_table(f) for f in sorted(folder.rglob("*.parquet")))
    schema = resolve_schema(None)
    vectorized = vectorized_columns(table, schema)
    assert len(vectorized["obs"]) == table.num_rows
    assert_same_columns(vectorized, per_episode_columns(table, schema))


def test_schema_override_and_legacy_dones():
    table = pa.table({
        "state": [[0.0, 0.1, 0.2, 0.3], [0.4, 0.5, 0.6, 0.7]],
        "next_state": [[0.4, 0.5, 0.6, 0.7], [0.8, 0.9, 1.0, 1.1]],
        "actions": [1, 0], "rewards": [1.0, 1.0], "dones": [False, True],
        "logits": [[0.1, 0.2], [0.3, 0.4]],
    })
    schema = resolve_schema({"obs": "state", "new_obs": "next_state"})
    vectorized = vectorized_columns(table, schema)
    np.testing.assert_array_equal(vectorized["terminateds"], [False, True])
    np.testing.assert_array_equal(vectorized["truncateds"], [False, False])
    assert vectorized["logits"].shape == (2, 2)
    assert_same_columns(vectorized, per_episode_columns(table, schema))


def test_the_seeds_external_expert_schema_with_done(tmp_path):
    """The seed's example, as written: ``"done": "d_t"`` maps the legacy flag to terminateds
    (truncateds False); unmapped ``logprobs_t`` becomes an extra column."""
    from offline_rl import BCConfig, Columns, OfflinePreLearner

    table = pa.table({
        "o_t": [[0.0, 0.1, 0.2, 0.3], [0.4, 0.5, 0.6, 0.7]],
        "a_t": [1, 0], "r_t": [1.0, 1.0],
        "o_tp1": [[0.4, 0.5, 0.6, 0.7], [0.8, 0.9, 1.0, 1.1]],
        "d_t": [False, True], "i_t": [None, None], "logprobs_t": [-0.1, -0.2],
    })
    pq.write_table(table, tmp_path / "expert.parquet")
    config = BCConfig().environment("CartPole-v1").offline_data(
        input_=[str(tmp_path)],
        input_read_schema={Columns.OBS: "o_t", Columns.ACTIONS: "a_t", Columns.REWARDS: "r_t",
                           Columns.NEXT_OBS: "o_tp1", Columns.INFOS: "i_t", "done": "d_t"})
    batch = train_columns(OfflinePreLearner(config, (CARTPOLE_OBS, gym.spaces.Discrete(2)))(table))
    assert batch["terminateds"].tolist() == [False, True]
    assert batch["truncateds"].tolist() == [False, False]
    assert batch["logprobs_t"].tolist() == [-0.1, -0.2]
    assert batch["obs"].shape == batch["new_obs"].shape == (2, 4)


def test_missing_required_column_is_named():
    table = pa.table({"obs": [[0.0] * 4], "actions": [0], "rewards": [1.0], "terminateds": [1]})
    with pytest.raises(DataFormatError, match=r"no column\(s\) \['new_obs'\].*input_read_schema"):
        vectorized_columns(table, resolve_schema(None))


def test_wrong_observation_shape_is_named():
    table = pa.table({"obs": [[0.0] * 3], "new_obs": [[0.0] * 3], "actions": [0],
                      "rewards": [1.0], "terminateds": [True]})
    with pytest.raises(DataFormatError, match=r"column 'obs' holds rows of shape \(3,\).*"
                                              r"expects rows of shape \(4,\)"):
        vectorized_columns(table, resolve_schema(None))


def test_ragged_and_null_columns_are_named():
    with pytest.raises(DataFormatError, match=r"'obs' is ragged: row 0 has 2 values but row 1"):
        column_to_numpy(pa.array([[1.0, 2.0], [1.0]]), "obs")
    with pytest.raises(DataFormatError, match=r"'rewards' has a missing \(null\) value in row 1"):
        column_to_numpy(pa.array([1.0, None]), "rewards")


def test_list_and_fixed_size_list_columns_become_2d_arrays():
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6, dtype=np.float32)), 3)
    np.testing.assert_array_equal(column_to_numpy(fixed, "x"), [[0, 1, 2], [3, 4, 5]])
    listed = pa.chunked_array([pa.array([[0.0, 1.0]]), pa.array([[2.0, 3.0]])])
    np.testing.assert_array_equal(column_to_numpy(listed, "x"), [[0, 1], [2, 3]])


@pytest.mark.parametrize("order", ["recorded", "interleaved", "shuffled"])
@pytest.mark.parametrize("with_t", [True, False])
def test_episode_ends_are_the_same_whatever_the_rows_order(order, with_t):
    # Stretches of one episode's rows take a cheaper path than Arrow's group_by; an id that
    # comes back after another's rows goes through group_by. Both name the same episodes.
    lengths = {"whole": 4, "tail": 3, "head": 2, "open": 3, "ended-here": 1}
    starts = {"whole": 0, "tail": 5, "head": 0, "open": 0, "ended-here": 9}
    ends = {"whole", "tail", "ended-here"}
    ids, t, done = [], [], []
    for eps_id, length in lengths.items():
        for step in range(length):
            ids.append(eps_id)
            t.append(starts[eps_id] + step)
            done.append(eps_id in ends and step == length - 1)
    rows = np.arange(len(ids))
    if order == "interleaved":
        rows = np.concatenate([rows[::2], rows[1::2]])
    elif order == "shuffled":
        rows = np.random.default_rng(0).permutation(rows)
    columns = {"eps_id": np.array(ids)[rows], "t": np.array(t)[rows]}
    table = pa.table(columns if with_t else {"eps_id": columns["eps_id"]})
    open_ids, ended_ids = episode_ends(table, {"terminateds": np.array(done)[rows]}, SCHEMA)
    assert sorted(open_ids) == ["head", "open"]
    # Without t no episode is known to be whole here, so every ended one is noted.
    assert sorted(ended_ids) == ["ended-here", "tail"] + ([] if with_t else ["whole"])
