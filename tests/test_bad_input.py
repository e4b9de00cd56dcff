"""The bad-input catalogue, through the real pipeline: every case gets an error naming where."""

from __future__ import annotations

import base64
import os
import pickle

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offline_rl import OfflineData
from offline_rl.data.tabular import DataFormatError

SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
pytestmark = pytest.mark.timeout(120)


def rows(count: int = 8, **overrides) -> pa.Table:
    columns = {
        "eps_id": ["a"] * count, "t": list(range(count)),
        "obs": np.arange(count * 4, dtype=np.float32).reshape(count, 4).tolist(),
        "new_obs": np.arange(4, count * 4 + 4, dtype=np.float32).reshape(count, 4).tolist(),
        "actions": [i % 2 for i in range(count)], "rewards": [1.0] * count,
        "terminateds": [False] * (count - 1) + [True],
    }
    columns.update(overrides)
    return pa.table(columns)


def first_batch_error(config, tmp_path, table: pa.Table, *, batch_size: int = 4) -> str:
    pq.write_table(table, tmp_path / "part.parquet")
    config = config.training(train_batch_size_per_learner=batch_size).offline_data(
        input_=str(tmp_path))
    data = OfflineData(config, SPACES).start()
    try:
        with pytest.raises(Exception) as error:
            data.sample()
        return str(error.value)
    finally:
        data.stop()


def test_column_mapped_by_schema_but_absent(tmp_path, bc_config):
    pq.write_table(rows(), tmp_path / "part.parquet")
    config = bc_config.offline_data(input_=str(tmp_path), input_read_schema={"obs": "state"})
    with pytest.raises(DataFormatError, match=r"part\.parquet has no column\(s\) \['state'\]"
                                              r".*input_read_schema"):
        OfflineData(config, SPACES)


def test_observations_of_the_wrong_type(tmp_path, bc_config):
    pq.write_table(rows(obs=[["x"] * 4] * 8), tmp_path / "part.parquet")
    with pytest.raises(DataFormatError, match=r"'obs'.*string.*Box"):
        OfflineData(bc_config.offline_data(input_=str(tmp_path)), SPACES)


def test_action_outside_the_action_space(ray_session, tmp_path, bc_config):
    message = first_batch_error(bc_config, tmp_path, rows(actions=[0, 1, 5, 0, 1, 0, 1, 0]))
    assert "action 5 in row 2 is outside the action space Discrete(2)" in message


def test_nonfinite_rewards_raise_by_default(ray_session, tmp_path, bc_config):
    message = first_batch_error(bc_config, tmp_path,
                                rows(rewards=[1.0, 1.0, 1.0, np.nan, 1.0, 1.0, 1.0, 1.0]))
    assert "column 'rewards' holds NaN or inf in row 3" in message
    assert "eps_id='a', t=3" in message and "input_nonfinite='drop'" in message


def test_nonfinite_rows_can_be_dropped_and_counted(ray_session, tmp_path, bc_config):
    observations = np.arange(32, dtype=np.float32).reshape(8, 4)
    observations[5, 2] = np.inf
    pq.write_table(rows(obs=observations.tolist()), tmp_path / "part.parquet")
    config = bc_config.training(train_batch_size_per_learner=7).offline_data(
        input_=str(tmp_path), input_nonfinite="drop",
        iter_batches_kwargs={"local_shuffle_buffer_size": None})
    data = OfflineData(config, SPACES).start()
    try:
        batch = data.sample()
        assert sorted(batch["obs"][:, 0] // 4) == [0, 1, 2, 3, 4, 6, 7]
        assert data.dropped(wait=True) == {"nonfinite_rows": 1}
    finally:
        data.stop()


def test_corrupt_parquet_file_is_named(ray_session, tmp_path, bc_config):
    pq.write_table(rows(), tmp_path / "good.parquet")
    pq.write_table(rows(), tmp_path / "torn.parquet")
    data = (tmp_path / "torn.parquet").read_bytes()
    (tmp_path / "torn.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match=r"torn\.parquet.*(corrupt|truncated|Parquet)"):
        OfflineData(bc_config.offline_data(input_=str(tmp_path)), SPACES)


def test_empty_dataset_is_named(ray_session, tmp_path, bc_config):
    message = first_batch_error(bc_config, tmp_path, rows().slice(0, 0))
    assert "no rows" in message or "empty" in message


def test_crafted_pickle_in_a_compressed_column_is_refused_without_running(
        ray_session, tmp_path, bc_config):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    frame = pa.Codec("lz4").compress(pickle.dumps(Payload()), asbytes=True)
    crafted = base64.b64encode(frame).decode()
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    table = rows(obs=[crafted] * 8, new_obs=[crafted] * 8)
    config = bc_config.offline_data(input_compress_columns=["obs"])
    message = first_batch_error(config, data_dir, table)
    assert "refusing to load posix.system" in message and "column 'obs'" in message
    assert not marker.exists()
