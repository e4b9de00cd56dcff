"""Issue 35, files that are not files: every file read from a dataset is a regular file inside
its input folder, within a size cap, checked before it is opened; JSON nesting is bounded
before Arrow's JSON reader (which crashed on it) parses it; a crashing read is not retried
without end; broken or looping symlinks are named and counted, not skipped in silence."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import ray

from offline_rl import BCConfig
from offline_rl.cli import main
from offline_rl.data.source.input_checks import check_json_files, check_parquet_columns
from offline_rl.data.source.input_files import (
    JSON_SUFFIXES,
    MAX_DATA_FILE_BYTES_ENV,
    PARQUET_SUFFIXES,
    input_paths,
    list_data_files,
)
from offline_rl.data.source.input_listing import InputListing
from offline_rl.data.source.input_locator import files_without
from offline_rl.data.source.input_reader import read_input
from offline_rl.errors import DataFormatError
from offline_rl.inspection import inspect_dataset

SAMPLE_BATCHES = Path(__file__).parent / "fixtures" / "rllib_cartpole_sample_batch_json"
#: One JSON line nested 100,000 deep (200 KB): Arrow's JSON reader dies of it (SIGSEGV).
DEEP_LINE = '{"type": "SampleBatch", "obs": ' + "[" * 100_000 + "]" * 100_000 + "}\n"


@pytest.fixture()
def folder(tmp_path) -> Path:
    """An input folder of one tiny Parquet file of 64 one-step transitions."""
    data = tmp_path / "data"
    data.mkdir()
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    pq.write_table(pa.table({
        "obs": obs.tolist(), "new_obs": obs.tolist(), "actions": (obs[:, 0] > 0).astype(np.int64),
        "rewards": np.ones(64), "terminateds": np.ones(64, bool), "truncateds": np.zeros(64, bool),
    }), data / "part-0.parquet")
    return data


def config_of(path: Path, **offline_data) -> BCConfig:
    return (BCConfig()
            .environment(observation_space=gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
                         action_space=gym.spaces.Discrete(2))
            .training(train_batch_size_per_learner=32)
            .offline_data(input_=str(path), dataset_num_iters_per_learner=1, **offline_data)
            .rl_module(model_config={"fcnet_hiddens": [8]}))


def test_a_symlink_leading_outside_the_input_folder_is_refused(folder, tmp_path):
    outside = tmp_path / "elsewhere.parquet"
    shutil.copy(folder / "part-0.parquet", outside)
    (folder / "part-1.parquet").symlink_to(outside)
    with pytest.raises(DataFormatError, match=rf"part-1\.parquet is a symlink to {outside}, "
                                              r"outside the input folder .*copy the data"):
        config_of(folder).build()
    with pytest.raises(DataFormatError, match=r"part-1\.parquet is a symlink to .*outside"):
        inspect_dataset(str(folder))


def test_a_symlink_inside_the_input_folder_is_read(folder):
    (folder / "same.parquet").symlink_to(folder / "part-0.parquet")
    assert inspect_dataset(str(folder))["files"] == 2


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_fifo_or_folder_named_as_a_data_file_is_named(folder, kind):
    # A FIFO hung a reader; a folder was skipped by the listing without a word.
    place = folder / "part-1.parquet"
    os.mkfifo(place) if kind == "fifo" else place.mkdir()
    expected = r"a FIFO \(named pipe\)" if kind == "fifo" else "a folder holding no data files"
    with pytest.raises(DataFormatError, match=rf"part-1\.parquet is {expected}, where "
                                              r"input_=.* should hold data files"):
        config_of(folder).build()
    with pytest.raises(DataFormatError, match=rf"part-1\.parquet is {expected}"):
        inspect_dataset(str(folder))


def test_a_folder_of_data_named_as_a_file_is_read(folder):
    # Spark writes a dataset as a folder named like a file (data.parquet/part-0.parquet).
    spark = folder / "more.parquet"
    spark.mkdir()
    shutil.copy(folder / "part-0.parquet", spark / "part-0.parquet")
    assert inspect_dataset(str(folder))["files"] == 2


def test_a_file_over_the_size_cap_is_refused(folder, monkeypatch):
    monkeypatch.setenv(MAX_DATA_FILE_BYTES_ENV, "100")
    with pytest.raises(DataFormatError, match=r"part-0\.parquet holds \d+ bytes, over the cap "
                                              rf"of 100 bytes .*{MAX_DATA_FILE_BYTES_ENV}"):
        config_of(folder).build()


def test_broken_and_looping_symlinks_are_named_and_counted(ray_session, folder, tmp_path,
                                                           capsys):
    (folder / "gone.parquet").symlink_to(folder / "deleted.parquet")
    (folder / "loop.parquet").symlink_to(folder / "loop.parquet")
    config_of(folder).to_yaml(tmp_path / "bc.yaml")
    with pytest.warns(UserWarning, match=r"skipped 2 input file\(s\) that cannot be read: "
                                         r".*gone\.parquet \(a broken or looping symlink\); "
                                         r".*loop\.parquet"):
        assert main(["train", str(tmp_path / "bc.yaml"), "--max-iterations", "1",
                     "--output-dir", str(tmp_path / "run")]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["dropped"] == {"skipped_files": 2}
    with pytest.warns(UserWarning, match=r"skipped 2 file\(s\) .*gone\.parquet"):
        assert inspect_dataset(str(folder))["files"] == 1


def test_json_nested_too_deep_is_refused_before_it_is_parsed(tmp_path):
    source = sorted(SAMPLE_BATCHES.glob("*.json"))[0]
    lines = source.read_text().splitlines(keepends=True)
    (tmp_path / source.name).write_text("".join([lines[0], DEEP_LINE, *lines[1:]]))
    config = config_of(tmp_path, input_read_method="read_json", input_read_sample_batches=True)
    message = rf"{re.escape(source.name)}, line 2: JSON nested deeper than 100 levels"
    with pytest.raises(DataFormatError, match=message):
        config.environment("CartPole-v1").build()
    with pytest.raises(DataFormatError, match=message):
        inspect_dataset(str(tmp_path))


@pytest.mark.slow
def test_a_read_that_crashes_its_process_is_not_retried_without_end(ray_session, tmp_path):
    # The check above keeps such a line from the reader; were a reader to crash anyway, Ray
    # Data retried its read task forever (the run hung, restarting a worker every second).
    (tmp_path / "deep.json").write_text(DEEP_LINE)
    config = config_of(tmp_path, input_read_method="read_json").data_config(
        (gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)))
    started = time.monotonic()
    with pytest.raises(ray.exceptions.RayError, match="worker died|crashed|SIGSEGV|exited"):
        read_input(config).materialize()
    assert time.monotonic() - started < 120


def test_every_reader_leaves_out_the_same_files(folder):
    # Issue 36: the pipeline's checks, the row locator and inspect list files by one rule; the
    # checks used to open hidden files Ray Data never reads (a FIFO there hung them).
    (folder / "_SUCCESS").write_text("")
    (folder / "dataset.json").write_text('{"env": "CartPole-v1"}')
    (folder / ".offline-rl").mkdir()
    (folder / ".offline-rl" / "run.json").write_text(DEEP_LINE)
    os.mkfifo(folder / ".part-1.parquet")
    (found,) = list_data_files(str(folder), None, (".parquet", ".json"))
    assert found.files == [str(folder / "part-0.parquet")]
    check_parquet_columns(InputListing.of(str(folder), None, PARQUET_SUFFIXES), {}, None)
    check_json_files(InputListing.of(str(folder), None, JSON_SUFFIXES))
    assert files_without(InputListing.of(str(folder), None, PARQUET_SUFFIXES), "obs") == []
    assert inspect_dataset(str(folder))["files"] == 1
    assert input_paths(str(folder / "*")) == [str(folder / "part-0.parquet")]


def test_other_filesystems_list_by_the_same_rules(folder):
    spark = folder / "more.parquet"  # a folder named as a data file, read through
    spark.mkdir()
    shutil.copy(folder / "part-0.parquet", spark / "part-0.parquet")
    (folder / "_temporary").mkdir()
    shutil.copy(folder / "part-0.parquet", folder / "_temporary" / "part-9.parquet")
    other = pafs.SubTreeFileSystem(str(folder.parent), pafs.LocalFileSystem())
    (local,) = list_data_files(str(folder), None, (".parquet",))
    (remote,) = list_data_files("data", other, (".parquet",))
    assert remote.files == ["data/more.parquet/part-0.parquet", "data/part-0.parquet"]
    assert local.files == [str(folder.parent / file) for file in remote.files]
    assert input_paths("data/*", other) == ["data/more.parquet", "data/part-0.parquet"]
    (folder / "empty.parquet").mkdir()
    for path, filesystem in ((str(folder), None), ("data", other)):
        with pytest.raises(DataFormatError, match=r"empty\.parquet is a folder holding no data"):
            list_data_files(path, filesystem, (".parquet",))
