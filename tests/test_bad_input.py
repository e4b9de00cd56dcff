"""The bad-input catalogue, through the real pipeline: every case gets an error naming where."""

from __future__ import annotations

import base64
import decimal
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offline_rl import (
    BCConfig,
    MultiAgentEpisode,
    OfflineData,
    OfflinePreLearner,
    SingleAgentEpisode,
)
from offline_rl.codec import pack_episode_state, pack_multi_agent_episode_state
from offline_rl.data.prelearner.call_output import train_columns
from offline_rl.data.prelearner.first_rows import SAMPLE_ROWS
from offline_rl.errors import DataFormatError, DataNotFoundError
from offline_rl.formats.episode_input import decode_episode, sample_batch_to_episodes

SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
pytestmark = pytest.mark.timeout(120)


def rows(count: int = 8, **overrides) -> pa.Table:
    columns = {
        "eps_id": ["a"] * count, "t": list(range(count)),
        # Small, so that they lie inside CartPole's observation space too.
        "obs": (np.arange(count * 4, dtype=np.float32).reshape(count, 4) / 1e4).tolist(),
        "new_obs": (np.arange(4, count * 4 + 4, dtype=np.float32).reshape(count, 4)
                    / 1e4).tolist(),
        "actions": [i % 2 for i in range(count)], "rewards": [1.0] * count,
        "terminateds": [False] * (count - 1) + [True],
    }
    columns.update(overrides)
    return pa.table(columns)


def first_batch_error(config, tmp_path, table: pa.Table, *, batch_size: int = 4) -> str:
    """The message of the ``DataFormatError`` that building the data stream (checking the first
    rows in this process) or taking its first batch (through the pipeline) raises."""
    pq.write_table(table, tmp_path / "part.parquet")
    config = config.training(train_batch_size_per_learner=batch_size).offline_data(
        input_=str(tmp_path))
    with pytest.raises(DataFormatError) as error:
        data = OfflineData(config, SPACES).start()
        try:
            data.sample()
        finally:
            data.stop()
    return str(error.value)


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
    assert re.search(r"column 'rewards' holds NaN or inf in \S+part\.parquet, row 3 "
                     r"\(eps_id='a', t=3\)", message), message
    assert "input_nonfinite='drop'" in message


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
        assert data.counts(wait=True) == {"nonfinite_rows": 1}
    finally:
        data.stop()


def test_drops_are_reported_by_the_iteration_that_trained_on_the_batch(ray_session, tmp_path,
                                                                      bc_config):
    observations = np.zeros((64, 4), np.float32)
    observations[[3, 40], 1] = np.nan
    pq.write_table(rows(64, obs=observations.tolist()), tmp_path / "part.parquet")
    config = (bc_config.environment(observation_space=SPACES[0], action_space=SPACES[1], env=None)
              .training(train_batch_size_per_learner=16)
              .offline_data(input_=str(tmp_path), input_nonfinite="drop"))
    with config.build() as algo:
        first = algo.train()  # the first batch the pipeline makes: the drops happen now
    assert first["data"]["dropped"] == {"nonfinite_rows": 2}


def test_tabular_episodes_that_never_end_are_counted_once_an_epoch_is_read(ray_session,
                                                                           tmp_path, bc_config):
    """Issue 17: tabular data trained on episodes without an end without a word. Episode "b"
    spans PreLearner calls (its end comes in a later call than its start); only "never" is
    unfinished."""
    ids = ["a"] * 10 + ["b"] * 300 + ["never"] * 20 + ["c"] * 10
    t = [*range(10), *range(300), *range(20), *range(10)]
    ends = [9, 309, 339]
    table = rows(len(ids), eps_id=ids, t=t,
                 terminateds=[row in ends for row in range(len(ids))])
    pq.write_table(table, tmp_path / "part.parquet")
    config = (bc_config.environment(observation_space=SPACES[0], action_space=SPACES[1], env=None)
              .training(train_batch_size_per_learner=4)
              .offline_data(input_=str(tmp_path), dataset_num_iters_per_learner=None))
    with config.build() as algo:
        results = [algo.train() for _ in range(2)]  # an epoch each
    assert [result["data"]["unfinished_episodes"] for result in results] == [1, 1]


def test_observations_outside_the_space_can_be_dropped_and_counted(ray_session, tmp_path,
                                                                  bc_config):
    cartpole = (gym.make("CartPole-v1").observation_space, gym.spaces.Discrete(2))
    observations = np.zeros((8, 4), np.float32)
    observations[5, 2] = 1000.0  # the pole angle is bounded by 0.42 rad
    pq.write_table(rows(obs=observations.tolist(), new_obs=np.zeros((8, 4)).tolist()),
                   tmp_path / "part.parquet")
    config = bc_config.training(train_batch_size_per_learner=7).offline_data(
        input_=str(tmp_path), input_obs_bounds="drop",
        iter_batches_kwargs={"local_shuffle_buffer_size": None})
    data = OfflineData(config, cartpole).start()
    try:
        assert len(data.sample()["obs"]) == 7
        assert data.counts(wait=True) == {"out_of_bounds_rows": 1}
    finally:
        data.stop()


def test_corrupt_parquet_file_is_named(ray_session, tmp_path, bc_config):
    pq.write_table(rows(), tmp_path / "good.parquet")
    pq.write_table(rows(), tmp_path / "torn.parquet")
    data = (tmp_path / "torn.parquet").read_bytes()
    (tmp_path / "torn.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match=r"torn\.parquet.*(corrupt|truncated|Parquet)"):
        OfflineData(bc_config.offline_data(input_=str(tmp_path)), SPACES)


def test_a_column_name_given_twice_is_named_with_its_file(ray_session, tmp_path, bc_config):
    pq.write_table(rows(), tmp_path / "good.parquet")
    table = rows()
    pq.write_table(table.append_column("rewards", table["rewards"]), tmp_path / "twice.parquet")
    with pytest.raises(DataFormatError, match=r"twice\.parquet: column\(s\) \['rewards'\] appear "
                                              r"more than once.*a name of its own"):
        OfflineData(bc_config.offline_data(input_=str(tmp_path)), SPACES)


def test_a_file_deleted_while_it_is_read_is_named_with_what_was_trained(tmp_path):
    """The stream's reads fail as pyarrow's FileNotFoundError, wrapped by Ray (which of the
    stream's reads meets the file gone depends on timing, so the failure is raised here)."""
    import pyarrow.fs as pafs

    from offline_rl.data.source.input_files import PARQUET_SUFFIXES
    from offline_rl.data.source.input_listing import InputListing
    from offline_rl.data.source.input_locator import naming_damaged_files

    pq.write_table(rows(), tmp_path / "part-0.parquet")
    gone = tmp_path / "part-1.parquet"
    with pytest.raises(DataFormatError, match=rf"{re.escape(str(gone))} is gone: it was deleted "
                                              r"or moved while the input was read \(\[Errno 2\] "
                                              r".*The rows read before it were trained on"):
        with naming_damaged_files(InputListing.of(str(tmp_path), None, PARQUET_SUFFIXES),
                                  "read_parquet"):
            try:
                pafs.LocalFileSystem().open_input_file(str(gone))
            except FileNotFoundError as error:  # what a Ray task does to it
                raise RuntimeError("ray::ReadParquet() failed") from error


def test_a_file_deleted_after_build_is_named_not_left_out(ray_session, tmp_path, bc_config):
    """Ray Data reads the files that were listed and checked (here: as ``OfflineData`` is made,
    as ``build()`` makes it), not the folder listed again."""
    for part in range(2):
        pq.write_table(rows(), tmp_path / f"part-{part}.parquet")
    data = OfflineData(bc_config.training(train_batch_size_per_learner=4).offline_data(
        input_=str(tmp_path)), SPACES)
    gone = tmp_path / "part-1.parquet"
    gone.unlink()
    try:
        with pytest.raises(DataNotFoundError, match=rf"{re.escape(str(gone))} is gone: it was "
                                                    r"deleted or moved after build\(\) listed "
                                                    r"and checked the input.*Put the file back, "
                                                    r"or build\(\) again"):
            data.start().sample()
    finally:
        data.stop()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["part-0.parquet"]


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


# --- types, ranges and the same checks for every format ------------------------------------
@pytest.mark.parametrize(("column", "values", "expected"), [
    ("rewards", ["abc"] * 8, r"column 'rewards' holds strings \('abc' in row 0\).*numbers"),
    ("terminateds", ["False"] * 8, r"column 'terminateds' holds strings.*booleans"),
    ("actions", ["1"] * 8, r"column 'actions' holds strings.*numbers"),
    ("rewards", pa.array([decimal.Decimal("1.5")] * 8), r"column 'rewards' holds Decimal values "
                                                        r"\(Decimal\('1\.5'\) in row 0\)"),
])
def test_strings_are_never_read_as_numbers_or_flags(tmp_path, bc_config, column, values,
                                                    expected):
    message = first_batch_error(bc_config, tmp_path, rows(**{column: values}))
    assert re.search(expected, message), message
    assert "part.parquet" in message


def test_episode_ids_that_are_not_text_are_named(ray_session, tmp_path, bc_config):
    table = rows()
    ids = pa.array([b"a"] * 5 + [b"\xfe\xff"] * 3, pa.binary()).view(pa.string())
    message = first_batch_error(bc_config, tmp_path, table.set_column(0, "eps_id", ids))
    assert "part.parquet: column 'eps_id' holds b'\\xfe\\xff' in row 5, bytes that are not " \
        "UTF-8 text" in message


def test_a_null_inside_a_rows_array_names_the_row(ray_session, tmp_path, bc_config):
    observations = (np.arange(32, dtype=np.float32).reshape(8, 4) / 1e4).tolist()
    observations[5][2] = None
    table = rows()
    table = table.set_column(table.schema.get_field_index("obs"), "obs",
                             pa.array(observations, pa.list_(pa.float32(), 4)))
    message = first_batch_error(bc_config, tmp_path, table)
    assert "column 'obs' has a missing (null) value inside the array of " in message
    assert message.endswith("part.parquet, row 5 (eps_id='a', t=5); fill it or drop the row")


@pytest.mark.parametrize(("value", "expected"), [
    (np.nan, r"column 'actions' holds NaN or inf in \S+part\.parquet, row 4 \(eps_id='a', t=4\)"),
    (1e300, r"action value 1e\+300 in row 4 is too large for the action space's dtype float32"),
])
def test_box_actions_that_are_not_finite_floats_are_named_before_training(ray_session, tmp_path,
                                                                         value, expected):
    spaces = (SPACES[0], gym.spaces.Box(-2, 2, (1,), np.float32))
    actions = [[0.5]] * 8
    actions[4] = [value]
    table = rows()
    table = table.set_column(table.schema.get_field_index("actions"), "actions",
                             pa.array(actions, pa.list_(pa.float64(), 1)))
    config = BCConfig().environment(observation_space=spaces[0], action_space=spaces[1])
    pq.write_table(table, tmp_path / "part.parquet")
    with pytest.raises(DataFormatError, match=expected):
        OfflineData(config.offline_data(input_=str(tmp_path)), spaces)


def test_observations_too_large_for_float32_are_named(tmp_path, bc_config):
    observations = np.zeros((8, 4))
    observations[6, 1] = 1e300
    message = first_batch_error(bc_config, tmp_path, rows(obs=observations.tolist()))
    assert "part.parquet" in message and "column 'obs'" in message
    assert "value 1e+300 in row 6 is too large for the observation space's dtype float32" in message


def test_ragged_observations_are_named(tmp_path, bc_config):
    ragged = [[0.0, 1.0, 2.0, 3.0]] * 5 + [[0.0, 1.0, 2.0]] + [[0.0, 1.0, 2.0, 3.0]] * 2
    message = first_batch_error(bc_config, tmp_path, rows(obs=ragged))
    assert "column 'obs' is ragged: row 0 has 4 values but row 5 has 3" in message


def write_format(folder: Path, source: str, defect: str) -> dict:
    """One small CartPole dataset in ``source``'s format with one ``defect``; the config
    options that read it."""
    steps = 10
    actions = np.zeros(steps, np.int64)
    rewards = np.ones(steps)
    if defect == "nan_reward":
        rewards[4] = np.nan
    elif defect == "discrete_action_outside":
        actions[4] = 3
    elif defect == "string_rewards":
        rewards = np.array(["abc"] * steps)
    observations = np.zeros((steps + 1, 4), np.float32)
    if defect == "obs_outside":  # issue 17: x1e30 in CartPole trained to a useless policy
        observations[4, 0] = 1e30
    folder.mkdir()
    if source == "episodes":
        state = SingleAgentEpisode("e0", observations=observations, actions=actions,
                                   rewards=rewards, terminated=True,
                                   len_lookback_buffer=0).to_numpy().get_state()
        pq.write_table(pa.table({"item": [pack_episode_state(state)]}),
                       folder / "part.parquet")
        return {"input_read_episodes": True}
    columns = {"eps_id": ["e0"] * steps, "t": list(range(steps)),
               "obs": observations[:-1].tolist(), "new_obs": observations[1:].tolist(),
               "actions": actions.tolist(), "rewards": rewards.tolist(),
               "terminateds": [False] * (steps - 1) + [True]}
    if source == "tabular":
        pq.write_table(pa.table(columns), folder / "part.parquet")
        return {}
    line = {"type": "SampleBatch", **columns, "eps_id": [0] * steps}
    (folder / "part.json").write_text(json.dumps(line) + "\n")
    return {"input_read_method": "read_json", "input_read_sample_batches": True}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("source", ["tabular", "episodes", "sample_batch_json"])
@pytest.mark.parametrize(("defect", "expected"), [
    ("nan_reward", r"column 'rewards' holds NaN or inf in (\S+\.parquet, )?row 4"),
    ("discrete_action_outside", r"action 3 in row 4 is outside the action space Discrete\(2\)"),
    ("string_rewards", r"column 'rewards' holds strings"),
    ("obs_outside", r"column '(new_)?obs' in (\S+\.parquet, )?row [34] (\(.*\) )?holds "
                    r"array\(\[1\.e\+30, .* outside the observation space Box"
                    r".*input_obs_bounds='drop'"),
])
def test_every_format_gets_the_same_checks(ray_session, tmp_path, bc_config, source, defect,
                                           expected):
    options = write_format(tmp_path / "data", source, defect)
    config = bc_config.training(train_batch_size_per_learner=4).offline_data(
        input_=str(tmp_path / "data"), **options)
    with pytest.raises(DataFormatError, match=expected):
        with config.build() as algo:
            algo.train()


@pytest.mark.parametrize(("field", "key", "value", "expected"), [
    ("is_terminated", None, "False", r"'is_terminated' must be a bool, got str 'False'"),
    ("t_started", None, "5", r"'t_started' must be an int >= 0 \(a timestep\), got str '5'"),
    ("t", None, -1, r"'t' must be an int >= 0 \(a timestep\), got int -1"),
    ("observations", "lookback", 10**9, r"field 'observations': buffer lookback 1000000000 is "
                                        r"more than the buffer's 3 items"),
    ("rewards", "lookback", -2, r"field 'rewards': buffer lookback must be an int >= 0, got -2"),
    ("actions", "lookback", 1, r"buffers have different lookbacks \(\{'observations': 0, "
                               r"'infos': 0, 'actions': 1, 'rewards': 0\}\)"),
])
def test_episode_state_fields_are_checked_with_their_cause(field, key, value, expected):
    state = SingleAgentEpisode("e0", observations=np.zeros((3, 4), np.float32), actions=[0, 1],
                               rewards=[1.0, 1.0], terminated=True,
                               len_lookback_buffer=0).get_state()
    if key is None:
        state[field] = value
    else:
        state[field] = {**state[field], key: value}
    with pytest.raises(DataFormatError, match=r"a\.parquet \(column 'item'\).*" + expected):
        decode_episode(pack_episode_state(state), "a.parquet (column 'item')")


def test_the_same_episode_read_by_two_actors_is_counted_once(ray_session, tmp_path, bc_config):
    from offline_rl.data.prelearner.data_ledger import open_book

    book = open_book()
    config = bc_config.training(train_batch_size_per_learner=4).offline_data(
        input_=str(tmp_path), input_read_episodes=True)
    episode = SingleAgentEpisode("same", observations=np.zeros((9, 4), np.float32),
                                 actions=[0] * 8, rewards=[1.0] * 8, terminated=True,
                                 len_lookback_buffer=0)
    item = pack_episode_state(episode.get_state())
    first, second = (OfflinePreLearner(config, SPACES, ledger=book) for _ in range(2))
    assert len(train_columns(first(pa.table({"item": [item], "path": ["a.parquet"]})))["obs"]) == 8
    assert second(pa.table({"item": [item], "path": ["b.parquet"]})) == {}
    assert book.totals() == {"duplicate_episodes": 1}
    book.close()


def test_the_first_rows_check_reads_as_the_pipeline_reads(ray_session, tmp_path, bc_config):
    import pyarrow.dataset as pds

    rewards = [1.0] * 8
    rewards[3] = np.nan  # removed by the user's row filter, so neither check may see it
    pq.write_table(rows(rewards=rewards), tmp_path / "part.parquet")
    config = bc_config.training(train_batch_size_per_learner=7).offline_data(
        input_=str(tmp_path), input_read_method_kwargs={"filter": pds.field("rewards") > 0})
    data = OfflineData(config, SPACES).start()
    try:
        assert np.isfinite(data.sample()["rewards"]).all()
    finally:
        data.stop()


# --- errors reach the caller as ours --------------------------------------------------------
def nan_beyond_the_first_rows(folder: Path) -> None:
    """A dataset whose first rows are fine; a NaN reward waits in a later row (found only by the
    pipeline's PreLearner actors, not by the driver's check of the first rows)."""
    count = 600
    rewards = [1.0] * count
    rewards[SAMPLE_ROWS + 200] = np.nan
    folder.mkdir()
    pq.write_table(rows(count, eps_id=["a"] * count, rewards=rewards), folder / "part.parquet")


@pytest.mark.timeout(120)
def test_a_pipeline_error_is_ours_with_rays_error_as_its_cause(ray_session, tmp_path, bc_config):
    import ray

    nan_beyond_the_first_rows(tmp_path / "data")
    config = bc_config.offline_data(input_=str(tmp_path / "data"))
    with pytest.raises(DataFormatError) as caught:
        with config.build() as algo:
            algo.train()
    message = str(caught.value)
    assert message.startswith("rows read from")
    assert "column 'rewards' holds NaN or inf" in message and f"t={SAMPLE_ROWS + 200}" in message
    assert "Traceback" not in message and "DataContext" not in message
    assert isinstance(caught.value.__cause__, ray.exceptions.RayError)


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_a_pipeline_error_reaches_the_caller_through_remote_learners(ray_session, tmp_path,
                                                                     bc_config):
    nan_beyond_the_first_rows(tmp_path / "data")
    config = (bc_config.training(train_batch_size_per_learner=64)
              .learners(num_learners=2, num_cpus_per_learner=0.25)
              .offline_data(input_=str(tmp_path / "data"), map_batches_kwargs={"num_cpus": 0.5}))
    with pytest.raises(DataFormatError, match=r"column 'rewards' holds NaN or inf") as caught:
        with config.build() as algo:
            algo.train()
    assert "Traceback" not in str(caught.value)


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_the_cli_ends_with_our_message_and_shows_rays_traceback_only_when_verbose(
        tmp_path, bc_config):
    nan_beyond_the_first_rows(tmp_path / "data")
    config_file = tmp_path / "bc.yaml"
    bc_config.offline_data(input_=str(tmp_path / "data")).to_yaml(config_file)
    command = [sys.executable, "-m", "offline_rl.cli", "train", str(config_file),
               "--max-iterations", "3", "--output-dir", str(tmp_path / "run")]
    quiet = subprocess.run(command, capture_output=True, text=True, timeout=150)
    assert quiet.returncode == 2
    last_line = quiet.stderr.strip().splitlines()[-1]
    assert last_line.startswith("offline-rl: error: rows read from")
    assert "column 'rewards' holds NaN or inf" in last_line
    assert "Traceback" not in quiet.stderr


def test_verbose_cli_prints_the_traceback(tmp_path, capsys):
    from offline_rl.cli import main

    config_file = tmp_path / "bad.yaml"
    config_file.write_text("offline_data:\n  no_such_key: 1\n")
    assert main(["train", str(config_file)]) == 2
    quiet = capsys.readouterr().err
    assert quiet.splitlines()[-1].startswith(
        f"offline-rl: error: {config_file}: unknown key(s) ['no_such_key'] in section "
        "'offline_data'")
    assert "Traceback" not in quiet
    assert main(["train", "--verbose", str(config_file)]) == 2
    verbose = capsys.readouterr().err
    assert "Traceback" in verbose and "ConfigError" in verbose
    assert verbose.splitlines()[-1] == quiet.splitlines()[-1]


@pytest.mark.slow
def test_a_corrupt_parquet_page_is_named_with_its_file_and_rows(ray_session, tmp_path,
                                                                bc_config):
    """Issue 17: a corrupt data page (valid footer) failed as Ray's remote traceback of
    'OSError: Corrupt snappy compressed data', naming no file."""
    pq.write_table(rows(64), tmp_path / "part-0.parquet")
    damaged = tmp_path / "part-1.parquet"
    # Repetitive values compress to snappy copy tags, which garbage bytes break.
    observations = np.tile(np.arange(40, dtype=np.float32), 32).reshape(320, 4) / 1e4
    pq.write_table(rows(320, obs=observations.tolist()), damaged, compression="snappy",
                   use_dictionary=False)
    chunk = pq.ParquetFile(damaged).metadata.row_group(0).column(2)
    assert chunk.path_in_schema.startswith("obs")
    data = bytearray(damaged.read_bytes())
    middle = chunk.data_page_offset + chunk.total_compressed_size // 2
    data[middle:middle + 64] = b"\xff" * 64
    damaged.write_bytes(bytes(data))
    with pytest.raises(OSError, match="[Ss]nappy"):
        pq.read_table(damaged)
    config = bc_config.training(train_batch_size_per_learner=16).offline_data(
        input_=str(tmp_path))
    with pytest.raises(DataFormatError) as error:
        data = OfflineData(config, SPACES).start()
        try:
            for _ in range(30):
                data.sample()
        finally:
            data.stop()
    assert re.search(r"part-1\.parquet, rows 0-319 \(row group 0\): .*[Ss]nappy.* corrupt or "
                     r"truncated", str(error.value)), error.value


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda line: line[: len(line) // 2], r"line 6: not valid JSON \(.* at column \d+\)"),
    (lambda line: "5", r"line 6: a JSON number \(5\) where a record belongs"),
])
def test_a_malformed_json_line_is_named_with_its_file_and_line(ray_session, tmp_path, damage,
                                                               expected):
    """Issue 17: a truncated line of SampleBatch JSON failed as Ray's JSONDecodeError pointing
    at the end of line 1 ('Extra data: line 2 column 1'), naming no file; issue 79: so did a
    line holding a number."""
    from offline_rl import BCConfig

    source = sorted((Path(__file__).parent / "fixtures" / "rllib_cartpole_sample_batch_json")
                    .glob("*.json"))[0]
    lines = source.read_text().splitlines()
    lines[5] = damage(lines[5])
    (tmp_path / source.name).write_text("\n".join(lines) + "\n")
    config = (BCConfig().environment("CartPole-v1").training(train_batch_size_per_learner=32)
              .offline_data(input_=str(tmp_path), input_read_method="read_json",
                            input_read_sample_batches=True, dataset_num_iters_per_learner=1))
    with pytest.raises(DataFormatError) as error, config.build() as algo:
        algo.train()
    assert re.search(rf"{re.escape(source.name)}, {expected}", str(error.value)), error.value


def test_sample_batch_infos_of_another_length_are_named():
    line = {"type": "SampleBatch", "obs": [[0.0]] * 3, "new_obs": [[0.0]] * 3,
            "actions": [0, 1, 0], "rewards": [1.0] * 3, "terminateds": [False, False, True],
            "infos": [{}]}
    with pytest.raises(DataFormatError, match=r"a\.json, line 2: SampleBatch field 'infos' holds "
                                              r"1 values for 3 actions; it needs a list of one"):
        sample_batch_to_episodes(line, "a.json, line 2")


def test_a_bad_row_is_named_by_its_file_and_row_there(ray_session, tmp_path, bc_config):
    """Issue 17: the row was counted within a PreLearner batch ('row 904' for file row 5000)
    and the folder named instead of the file."""
    observations = np.zeros((6000, 4), np.float32)
    observations[5000, 2] = np.nan
    message = first_batch_error(bc_config, tmp_path, rows(6000, obs=observations.tolist()),
                                batch_size=64)
    assert re.search(r"column 'obs' holds NaN or inf in .*part\.parquet, row 5000 "
                     r"\(eps_id='a', t=5000\)", message), message


def test_a_bad_row_without_eps_id_and_t_is_found_by_its_values(ray_session, tmp_path,
                                                                bc_config):
    observations = np.arange(6000 * 4, dtype=np.float32).reshape(6000, 4) / 1e5
    observations[5000, 2] = np.nan
    table = rows(6000, obs=observations.tolist()).drop_columns(["eps_id", "t"])
    message = first_batch_error(bc_config, tmp_path, table, batch_size=64)
    assert re.search(r"column 'obs' holds NaN or inf in \S+part\.parquet, row 5000 \(1 row",
                     message), message


@pytest.mark.parametrize("source", ["sample_batch_json", "episodes", "tabular"])
def test_multi_agent_data_is_refused_as_such(ray_session, tmp_path, bc_config, source):
    """Issue 39: a MultiAgentBatch line was refused as 'ragged or mixed', a MultiAgentEpisode
    state as missing fields, and rows naming agents trained one module on every agent's rows,
    none saying the data was multi-agent."""
    agents = ("pursuer", "evader")
    if source == "episodes":
        episode = MultiAgentEpisode("m0")
        episode.add_env_reset(dict.fromkeys(agents, np.zeros(4, np.float32)))
        episode.add_env_step(dict.fromkeys(agents, np.ones(4, np.float32)),
                             dict.fromkeys(agents, 1), dict.fromkeys(agents, 1.0),
                             terminateds={"__all__": True})
        state = pack_multi_agent_episode_state(episode.to_numpy().get_state())
        pq.write_table(pa.table({"item": [state]}), tmp_path / "ma.parquet")
        options, expected = {"input_read_episodes": True}, (
            r"ma\.parquet \(column 'item'\): multi-agent episode m0 \(agents \['evader', "
            r"'pursuer'\]\), which one module \('default_policy'\) would train on mixed. "
            r"Declare the modules and which agent each acts for: config.multi_agent")
    elif source == "tabular":
        table = rows(4).append_column("agent_id", pa.array(["pursuer", "evader"] * 2))
        pq.write_table(table, tmp_path / "ma.parquet")
        options, expected = {}, (r"ma\.parquet, row 0 \(.*\): column 'agent_id' names the "
                                 r"agents \['evader', 'pursuer'\]: rows of multi-agent data, "
                                 r"which one module \('default_policy'\) would train on "
                                 r"mixed. Declare the modules and map the agents to them: "
                                 r"config.multi_agent")
    else:
        batches = {name: {"obs": [[0.0] * 4] * 2, "new_obs": [[0.0] * 4] * 2, "actions": [0, 1],
                          "rewards": [1.0, 1.0], "terminateds": [False, True]}
                   for name in agents}
        line = {"type": "MultiAgentBatch", "policy_batches": batches, "count": 2}
        (tmp_path / "ma.json").write_text(json.dumps(line) + "\n")
        options, expected = ({"input_read_method": "read_json", "input_read_sample_batches": True},
                             r"ma\.json.*: a MultiAgentBatch line \(policies \['evader', "
                             r"'pursuer'\]\): multi-agent data, which one module "
                             r"\('default_policy'\) would train on mixed. Declare the "
                             r"modules \(the policy ids\): config.multi_agent")
    config = bc_config.training(train_batch_size_per_learner=2).offline_data(
        input_=str(tmp_path), **options)
    with pytest.raises(DataFormatError, match=expected), config.build() as algo:
        algo.train()


def test_rows_of_the_default_module_or_no_agent_are_single_agent():
    from offline_rl.columns import SCHEMA
    from offline_rl.data.prelearner.data_ledger import LedgerClient
    from offline_rl.data.prelearner.tabular_rows import RowReader
    from offline_rl.data.source.data_config import DataConfig
    from offline_rl.data.source.input_locator import RowLocator

    config = DataConfig()
    reader = RowReader(config, SCHEMA, SPACES, RowLocator(config, SCHEMA, "rows"),
                       LedgerClient(None))
    table = rows(4, agent_id=pa.nulls(4, pa.string()),
                 module_id=["default_policy", None, "default_policy", None])
    assert len(reader.read(table)["actions"]) == 4
    through_pandas = rows(4, agent_id=[float("nan")] * 4)  # a pandas batch's empty ids
    assert len(reader.read(through_pandas)["actions"]) == 4
    with pytest.raises(DataFormatError, match=r"column 'module_id' names the modules \['other'\]"):
        reader.read(rows(4, module_id=["default_policy", "other"] * 2))


def test_a_space_holding_an_array_is_named_as_malformed():
    """Spaces read from episodes are decoded once per distinct dict: one holding an array
    (msgpack-numpy decodes them anywhere) cannot be looked up, and is still reported."""
    state = SingleAgentEpisode("e0", observations=np.zeros((3, 4), np.float32), actions=[0, 1],
                               rewards=[1.0, 1.0], terminated=True, len_lookback_buffer=0,
                               observation_space=SPACES[0]).to_numpy().get_state()
    state["_observation_space"]["low"] = np.zeros(4, np.float32)
    with pytest.raises(DataFormatError, match=r"a\.parquet \(column 'item'\): episode state field "
                                              r"'_observation_space': space\.low: not a base64"):
        decode_episode(pack_episode_state(state), "a.parquet (column 'item')")
