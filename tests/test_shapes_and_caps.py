"""Issue 35, classes 5 and 8, through the real entry points: per-row shapes are checked against
the spaces (a one-element list where one value is expected is squeezed, everything else is
refused), losses never broadcast, a NaN/inf loss stops ``train()``, episodes recorded with
another space are refused, and a Parquet footer declaring more than its file holds (or more than
the caps) is refused before anything is allocated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import torch
from ray.data.extensions import ArrowTensorArray

from offline_rl import BCConfig, OfflinePreLearner, SingleAgentEpisode
from offline_rl.algorithms.iql import IQLConfig
from offline_rl.codec import pack_episode_state
from offline_rl.data.prelearner.call_output import train_columns
from offline_rl.data.source.input_checks import check_parquet_columns
from offline_rl.data.source.input_files import PARQUET_SUFFIXES
from offline_rl.data.source.input_listing import InputListing
from offline_rl.errors import DataFormatError, TrainingError
from offline_rl.formats import parquet_footer
from offline_rl.formats.parquet_footer import FooterCaps
from tests.crafted_parquet import with_declared_rows
from tests.prelearners import WideRewards

SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cartpole_table(cartpole_data) -> pa.Table:
    """The CartPole dataset as one table, cut to 4096 rows (kept in order)."""
    files = sorted(str(file) for file in cartpole_data.rglob("*.parquet"))
    return pads.dataset(files, format="parquet").to_table().slice(0, 4096)


def write(table: pa.Table, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / "part.parquet")
    return folder


def replaced(table: pa.Table, name: str, column: pa.Array) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, column)


def one_element_lists(values: np.ndarray, storage: str) -> pa.Array:
    rows = values.reshape(-1, 1)
    return pa.array(rows.tolist()) if storage == "list" else ArrowTensorArray.from_numpy(rows)


def first_losses(config, data: Path, updates: int = 3) -> dict[str, float]:
    config = config.offline_data(input_=str(data), dataset_num_iters_per_learner=updates)
    with config.build() as algo:
        return algo.train()["learners"]["default_policy"]


def iql_config() -> IQLConfig:
    return (IQLConfig().environment("CartPole-v1")
            .training(train_batch_size_per_learner=256)
            .rl_module(model_config={"fcnet_hiddens": [16]}).debugging(seed=0))


# ------------------------------------------------------------------------- class 5: shapes
@pytest.mark.parametrize(("algorithm", "column", "storage"), [
    ("bc", "actions", "list"), ("bc", "actions", "tensor"), ("iql", "rewards", "list")])
@pytest.mark.slow
def test_a_one_element_list_per_row_trains_exactly_as_the_value(
        ray_session, bc_config, cartpole_table, tmp_path, algorithm, column, storage):
    """Was: BC's log-probability broadcast to (batch, batch), its loss stuck at ln 2; IQL's TD
    target (batch, batch). Now the trailing 1 is squeezed: the same losses as the plain data."""
    config = bc_config if algorithm == "bc" else iql_config()
    values = cartpole_table.column(column).to_numpy()
    nested = replaced(cartpole_table, column, one_element_lists(values, storage))
    expected = first_losses(config, write(cartpole_table, tmp_path / "plain"))
    got = first_losses(config, write(nested, tmp_path / "nested"))
    losses = [name for name in expected if name.endswith("_loss")]
    assert losses and all(got[name] == pytest.approx(expected[name]) for name in losses)


@pytest.mark.parametrize(("column", "rows", "found", "expected"), [
    ("actions", lambda t: [[a, a] for a in t["actions"].to_pylist()], "(2,)", "()"),
    ("obs", lambda t: [[[v] for v in row] for row in t["obs"].to_pylist()], "(4, 1)", "(4,)"),
    ("rewards", lambda t: [[r, r] for r in t["rewards"].to_pylist()], "(2,)", "()"),
    ("terminateds", lambda t: [[d, d] for d in t["terminateds"].to_pylist()], "(2,)", "()"),
])
def test_any_other_shape_is_refused_at_build_naming_file_column_and_shapes(
        ray_session, bc_config, cartpole_table, tmp_path, column, rows, found, expected):
    table = replaced(cartpole_table.slice(0, 64), column, pa.array(rows(cartpole_table[:64])))
    config = bc_config.offline_data(input_=str(write(table, tmp_path)))
    with pytest.raises(DataFormatError) as error:
        config.build()
    message = str(error.value)
    assert f"part.parquet: column {column!r} holds rows of shape {found} (row 0: " in message
    assert f"expects rows of shape {expected}; nothing is broadcast" in message


def episode(actions: np.ndarray, rewards: np.ndarray) -> SingleAgentEpisode:
    steps = len(actions)
    return SingleAgentEpisode("e1", observations=np.zeros((steps + 1, 4), np.float32),
                              actions=actions, rewards=rewards, terminated=True,
                              len_lookback_buffer=0).to_numpy()


def episodes_config(path: Path, batch_size: int = 8) -> BCConfig:
    return (BCConfig().environment("CartPole-v1")
            .training(train_batch_size_per_learner=batch_size)
            .offline_data(input_=str(path), input_read_episodes=True).debugging(seed=0))


def test_an_episode_recorded_with_another_discrete_space_is_refused(ray_session, tmp_path):
    """Was: a Discrete(7) recording trained in a CartPole (Discrete(2)) run."""
    recorded = episode(np.zeros(5, np.int64), np.ones(5))
    recorded.action_space = gym.spaces.Discrete(7)
    items = [pack_episode_state(recorded.get_state())]
    write(pa.table({"item": items}), tmp_path)
    with pytest.raises(DataFormatError, match=r"part\.parquet: episode e1 was recorded with the "
                                              r"action space Discrete\(7\), but the config's is "
                                              r"Discrete\(2\)"):
        episodes_config(tmp_path).build()


def test_episodes_and_sample_batches_get_the_same_shape_rule(tmp_path):
    stored = episode(np.array([[0], [1], [1], [0]]), np.ones((4, 1)))
    batch = train_columns(OfflinePreLearner(episodes_config(tmp_path, 4), SPACES)(
        pa.table({"item": [pack_episode_state(stored.get_state())]})))
    assert batch["actions"].shape == batch["rewards"].shape == (4,)
    sample_batch = {"type": "SampleBatch", "eps_id": [1, 1], "obs": [[0.0] * 4] * 2,
                    "new_obs": [[0.0] * 4] * 2, "actions": [0, 1], "rewards": [[1.0, 0.0]] * 2,
                    "dones": [False, True]}
    config = episodes_config(tmp_path, 2).offline_data(input_read_episodes=False,
                                                      input_read_sample_batches=True)
    with pytest.raises(DataFormatError, match=r"a\.json: episode 1: column 'rewards' holds "
                                              r"rows of shape \(2,\)"):
        OfflinePreLearner(config, SPACES)(pa.Table.from_pylist([{**sample_batch,
                                                                  "path": "a.json"}]))


def test_a_loss_given_another_shape_stops_train_naming_the_column(ray_session, cartpole_data):
    config = iql_config().offline_data(input_=str(cartpole_data), prelearner_class=WideRewards,
                                       dataset_num_iters_per_learner=2)
    with config.build() as algo, pytest.raises(TrainingError) as error:
        algo.train()
    assert str(error.value).startswith("training iteration 1, update 1: batch column 'rewards' "
                                       "has shape (256, 1), but the losses expect (256,)")


@pytest.mark.parametrize("num_learners", [0, 1])
@pytest.mark.slow
def test_a_loss_that_becomes_infinite_stops_train_naming_iteration_loss_and_causes(
        ray_session, cartpole_table, tmp_path, num_learners):
    """Rewards near float32's largest value make IQL's TD loss infinite in its first update."""
    huge = replaced(cartpole_table, "rewards", pa.array(np.full(len(cartpole_table), 3e38)))
    config = iql_config().learners(num_learners=num_learners, num_cpus_per_learner=0.25)
    config = config.offline_data(input_=str(write(huge, tmp_path)), dataset_num_iters_per_learner=2,
                                 map_batches_kwargs={"num_cpus": 0.5})
    with config.build() as algo, pytest.raises(TrainingError) as error:
        algo.train()
    message = str(error.value)
    assert message.startswith("training iteration 1, update 1: the loss became NaN or infinite "
                              "(critic_loss=inf); training stopped")
    assert "learning rate too high" in message and "rescale the rewards" in message


def test_nan_outputs_are_a_training_error_not_a_distribution_value_error():
    config = BCConfig().rl_module(model_config={"fcnet_hiddens": [8]})
    learner = config.get_default_learner_class()(config.learner_config(
        config.get_rl_module_spec(*SPACES)))
    with torch.no_grad():
        for parameter in learner.module.parameters():
            parameter.fill_(float("nan"))
    batch = {"obs": np.zeros((4, 4), np.float32), "actions": np.array([0, 1, 0, 1])}
    with pytest.raises(TrainingError, match=r"update 1: the module's outputs "
                                            r"\['action_dist_inputs'\] hold NaN or inf"):
        learner.update(batch)


# ------------------------------------------------------------------ class 8: footer caps
def bomb(folder: Path, *, episodes: bool, consistent: bool = False) -> Path:
    """A real 8-row Parquet file whose footer declares 2^40 rows (``consistent``: and as many
    values per column chunk, so only the cap can refuse it)."""
    if episodes:
        table = pa.table({"item": [pack_episode_state(episode(np.zeros(3, np.int64),
                                                              np.ones(3)).get_state())] * 8})
    else:
        table = pa.table({"obs": [[0.0] * 4] * 8, "new_obs": [[0.0] * 4] * 8, "actions": [0] * 8,
                          "rewards": [1.0] * 8, "terminateds": [False] * 7 + [True]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part.parquet").write_bytes(
        with_declared_rows(sink.getvalue().to_pybytes(), 2**40, values_too=consistent))
    return folder


@pytest.mark.parametrize("episodes", [False, True])
def test_a_footer_declaring_2_to_the_40_rows_is_refused_at_build(ray_session, tmp_path,
                                                                 episodes):
    config = episodes_config(bomb(tmp_path, episodes=episodes)).offline_data(
        input_read_episodes=episodes)
    with pytest.raises(DataFormatError, match=r"part\.parquet: its Parquet footer is damaged or "
                                              r"crafted \(row group 0 declares 1099511627776 "
                                              r"rows, but its column '[\w.]+' stores \d+ "
                                              r"values\)"):
        config.build()


def test_a_consistent_footer_over_the_cap_names_value_cap_and_constant(tmp_path):
    with pytest.raises(DataFormatError, match=r"declares 1099511627776 rows, over the cap of "
                                              r"4294967296 rows.*parquet_footer\."
                                              r"MAX_ROWS_PER_FILE = \.\.\."):
        check_parquet_columns(InputListing.of(str(bomb(tmp_path, episodes=False,
                                                       consistent=True)), None, PARQUET_SUFFIXES),
                              {}, SPACES[0])


def test_the_caps_are_configurable(tmp_path, monkeypatch):
    folder = str(write(pa.table({"obs": [[0.0] * 4] * 8, "new_obs": [[0.0] * 4] * 8,
                                 "actions": [0] * 8, "rewards": [1.0] * 8,
                                 "terminateds": [False] * 8}), tmp_path))
    listing = InputListing.of(folder, None, PARQUET_SUFFIXES)
    assert check_parquet_columns(listing, {}, SPACES[0]) is None  # the defaults
    with pytest.raises(DataFormatError, match="declares 8 rows in row group 0, over the cap of 4"):
        check_parquet_columns(listing, {}, SPACES[0], FooterCaps(max_rows_per_row_group=4))
    monkeypatch.setattr(parquet_footer, "MAX_ROW_GROUP_BYTES", 10)
    with pytest.raises(DataFormatError, match="uncompressed bytes in row group 0, over the cap"):
        check_parquet_columns(listing, {}, SPACES[0])


CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, 8 * 2**30))  # a safety net for a regression
import gymnasium as gym, numpy as np
from offline_rl import OfflineData
from offline_rl.data.source.data_config import DataConfig
from offline_rl.errors import DataFormatError
from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.training import TrainingConfig
spaces = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
try:
    OfflineData(DataConfig(OfflineDataConfig(input_=sys.argv[1]),
                           TrainingConfig(train_batch_size_per_learner=4)), spaces)
except DataFormatError as error:
    print("refused:", error)
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")))
"""


def test_the_bomb_is_refused_in_a_child_process_without_growing_it(tmp_path):
    """Was: pyarrow allocated for 2^40 rows (the process grew to 24 GB and was killed)."""
    folder = bomb(tmp_path / "bomb", episodes=False)
    run = subprocess.run([sys.executable, "-c", CHILD, str(folder)], capture_output=True,
                         text=True, timeout=240, cwd=Path(__file__).parent.parent)
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 0 and lines[0].startswith("refused:"), run.stderr[-2000:]
    assert "damaged or crafted" in lines[0]
    assert int(lines[-1]) < 1024 * 1024  # peak resident KiB since exec, imports included
