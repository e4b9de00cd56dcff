"""Input on pyarrow filesystems, against a real S3-compatible server (moto) on loopback: paths,
globs, checks, pushdown and BC training through the full Ray Data pipeline."""

from __future__ import annotations

import logging
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow.dataset as pds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import ray.data

from offline_rl import Algorithm, OfflineData
from offline_rl.data.source.input_checks import check_parquet_columns
from offline_rl.data.source.input_files import PARQUET_SUFFIXES, input_paths
from offline_rl.data.source.input_listing import InputListing
from offline_rl.data.source.input_reader import read_input, resolve_read_method
from offline_rl.errors import ConfigError, DataFormatError, DataNotFoundError
from offline_rl.filesystems import resolve_filesystem

SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
BUCKET = "offline-rl"
ROWS = 20_000  # the cartpole_data fixture: 40 episodes x 500 steps
PARTS = 4  # the same rows split into this many files under parts/


@pytest.fixture(scope="session")
def s3_kwargs() -> dict[str, str]:
    """An S3-compatible server (moto) on 127.0.0.1 for the session: S3FileSystem kwargs."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    yield {"access_key": "testing", "secret_key": "testing", "region": "us-east-1",
           "endpoint_override": f"127.0.0.1:{port}", "scheme": "http"}
    server.stop()


@pytest.fixture(scope="session")
def s3_fs(s3_kwargs) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(**s3_kwargs)


@pytest.fixture(scope="session")
def s3_data(s3_kwargs, cartpole_data) -> str:
    """``s3://offline-rl``, holding cartpole/ (the cartpole_data files), parts/ (the same rows
    in PARTS files), no-new-obs/ (a file lacking a column) and notes/ (no Parquet)."""
    fs = pafs.S3FileSystem(allow_bucket_creation=True, **s3_kwargs)
    fs.create_dir(BUCKET)
    pafs.copy_files(str(cartpole_data), f"{BUCKET}/cartpole", destination_filesystem=fs)
    (file,) = cartpole_data.rglob("*.parquet")
    table = pq.read_table(file)
    rows = len(table) // PARTS
    for part in range(PARTS):
        pq.write_table(table.slice(part * rows, rows), f"{BUCKET}/parts/part-{part}.parquet",
                       filesystem=fs)
    pq.write_table(table.slice(0, 10).drop_columns(["new_obs"]),
                   f"{BUCKET}/no-new-obs/part.parquet", filesystem=fs)
    with fs.open_output_stream(f"{BUCKET}/notes/readme.txt") as stream:
        stream.write(b"not data")
    return f"s3://{BUCKET}"


def test_resolve_filesystem_builds_named_filesystems_and_rejects_the_rest():
    s3 = resolve_filesystem("s3", {"region": "eu-west-1", "endpoint_override": "127.0.0.1:9"})
    assert isinstance(s3, pafs.S3FileSystem) and s3.region == "eu-west-1"
    assert isinstance(resolve_filesystem("gcs", {"anonymous": True}), pafs.GcsFileSystem)
    assert isinstance(resolve_filesystem("abs", {"account_name": "acct"}), pafs.AzureFileSystem)
    assert resolve_filesystem(s3, {}) is s3
    assert resolve_filesystem(None, None) is None
    with pytest.raises(ConfigError, match=r"\(keys \['region'\]\) are not used with a pyarrow"):
        resolve_filesystem(s3, {"region": "us-east-1"})
    with pytest.raises(ConfigError, match=r"\(keys \['region'\]\) need input_filesystem"):
        resolve_filesystem(None, {"region": "us-east-1"})
    with pytest.raises(ConfigError, match=r"input_filesystem='hdfs' is not supported.*'abs'"):
        resolve_filesystem("hdfs", {})
    with pytest.raises(ConfigError, match=r"keys \['secret_key', 'sekret'\]\) do not fit "
                                         r"pyarrow\.fs\.S3FileSystem") as error:
        resolve_filesystem("s3", {"secret_key": "hidden-value", "sekret": "x"})
    assert "hidden-value" not in str(error.value)


def test_unknown_read_method_names_valid_ones():
    assert resolve_read_method("read_json") is ray.data.read_json
    with pytest.raises(ConfigError, match=r"'read_parqet' is not one of .*'read_parquet'"):
        resolve_read_method("read_parqet")
    with pytest.raises(ConfigError, match="ray.data.read_"):
        resolve_read_method("read_api")  # a module of ray.data, not a read function


def test_input_paths_expand_local_and_s3_globs(tmp_path, s3_data, s3_fs):
    for name in ("b.parquet", "a.parquet", "notes.txt"):
        (tmp_path / name).write_text("")
    local = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
    assert input_paths(str(tmp_path / "*.parquet")) == local
    assert input_paths([tmp_path / "notes.txt", str(tmp_path / "?.parquet")]) == [
        str(tmp_path / "notes.txt"), *local]
    with pytest.raises(FileNotFoundError, match=r"pattern '.*\*\.json' matches no files"):
        input_paths(str(tmp_path / "*.json"))

    assert input_paths(f"{s3_data}/parts/part-[12].parquet", s3_fs) == [
        f"{s3_data}/parts/part-1.parquet", f"{s3_data}/parts/part-2.parquet"]
    assert input_paths(f"{BUCKET}/*/part.parquet", s3_fs) == [f"{BUCKET}/no-new-obs/part.parquet"]
    assert input_paths(f"{s3_data}/cartpole", s3_fs) == [f"{s3_data}/cartpole"]
    assert input_paths("s3://elsewhere/*.parquet") == ["s3://elsewhere/*.parquet"]  # Ray's job
    with pytest.raises(FileNotFoundError, match="'s3://offline-rl/nope/\\*' matches no files"):
        input_paths(f"{s3_data}/nope/*", s3_fs)


def check_columns(paths: list[str], filesystem: pafs.FileSystem, schema: dict[str, str],
                  observation_space: gym.Space) -> None:
    check_parquet_columns(InputListing.of(paths, filesystem, PARQUET_SUFFIXES), schema,
                          observation_space)


def test_s3_checks_name_the_path_file_and_column(s3_data, s3_fs, s3_kwargs):
    check_columns([f"{s3_data}/cartpole", f"{BUCKET}/parts"], s3_fs, {}, SPACES[0])
    with pytest.raises(DataFormatError, match=r"^s3://offline-rl/no-new-obs/part\.parquet has "
                                              r"no column\(s\) \['new_obs'\]"):
        check_columns([f"{s3_data}/no-new-obs"], s3_fs, {}, SPACES[0])
    check_columns([f"{s3_data}/no-new-obs"], s3_fs, {"new_obs": "obs"}, SPACES[0])
    with pytest.raises(DataFormatError, match=r"^s3://offline-rl/parts/part-0\.parquet: column "
                                              r"'obs' holds arrays of shape \(4,\)"):
        check_columns([f"{s3_data}/parts"], s3_fs, {},
                      gym.spaces.Box(-1, 1, (3,), np.float32))
    for missing in (f"{s3_data}/nope", "s3://no-such-bucket/data"):
        with pytest.raises(FileNotFoundError,
                           match=f"input_='{missing}' does not exist on S3FileSystem"):
            check_columns([missing], s3_fs, {}, SPACES[0])
    with pytest.raises(DataFormatError, match=r"no Parquet files \(\*\.parquet\) under "
                                              r"'s3://offline-rl/notes'"):
        check_columns([f"{s3_data}/notes"], s3_fs, {}, SPACES[0])
    unreachable = pafs.S3FileSystem(
        **{**s3_kwargs, "endpoint_override": "127.0.0.1:1"}, connect_timeout=1,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
    with pytest.raises(DataNotFoundError, match=r"cannot read input_='s3://offline-rl/cartpole' "
                                                r"through S3FileSystem: .*Check the path and "
                                                r"input_filesystem_kw"):
        check_columns([f"{s3_data}/cartpole"], unreachable, {}, SPACES[0])


def test_offline_data_checks_s3_input_before_any_ray_work(bc_config, s3_data, s3_kwargs):
    s3 = {"input_filesystem": "s3", "input_filesystem_kwargs": s3_kwargs}
    with pytest.raises(DataFormatError, match=r"no-new-obs/part\.parquet has no column"):
        OfflineData(bc_config.offline_data(input_=f"{s3_data}/no-new-obs", **s3), SPACES)
    with pytest.raises(FileNotFoundError, match="'s3://offline-rl/nope' does not exist"):
        OfflineData(bc_config.offline_data(input_=f"{s3_data}/nope", **s3), SPACES)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("given_as", ["name", "instance"])
@pytest.mark.slow
def test_bc_trains_on_s3_data(ray_session, bc_config, s3_data, s3_kwargs, given_as, tmp_path,
                              monkeypatch):
    filesystem = ({"input_filesystem": "s3", "input_filesystem_kwargs": s3_kwargs}
                  if given_as == "name" else {"input_filesystem": pafs.S3FileSystem(**s3_kwargs)})
    config = bc_config.offline_data(input_=f"{s3_data}/cartpole", **filesystem)
    with config.build() as algo:
        results = [algo.train()["learners"]["__all_modules__"] for _ in range(2)]
        if given_as == "name":
            checkpoint = algo.save_to_path(tmp_path / "checkpoint")
    assert [result["num_env_steps_trained"] for result in results] == [512, 512]
    assert results[-1]["num_env_steps_trained_lifetime"] == 1024
    if given_as == "instance":
        return
    # The keys are not on disk; restored, the S3 filesystem finds them in the environment.
    saved = (tmp_path / "checkpoint" / "config.yaml").read_text()
    assert s3_kwargs["secret_key"] not in saved.replace("secret_key", "")
    assert saved.startswith("# Credentials are never saved: input_filesystem_kwargs"
                            "['access_key'], input_filesystem_kwargs['secret_key']")
    assert s3_kwargs["endpoint_override"] in saved  # not a credential: kept
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_kwargs["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_kwargs["secret_key"])
    with pytest.warns(UserWarning, match=r"holds no input_filesystem_kwargs \['access_key', "
                                         r"'secret_key'\].*from the environment"):
        restored = Algorithm.from_checkpoint(checkpoint)
    with restored:
        assert restored.train()["learners"]["__all_modules__"][
            "num_env_steps_trained_lifetime"] == 1536


@pytest.mark.timeout(120)
def test_every_s3_row_is_streamed_once_per_epoch(ray_session, bc_config, s3_data, s3_kwargs):
    config = bc_config.offline_data(
        input_=f"{s3_data}/parts", input_filesystem="s3", input_filesystem_kwargs=s3_kwargs,
        iter_batches_kwargs={"local_shuffle_buffer_size": None})
    data = OfflineData(config, SPACES).start()
    try:
        while data.stats.epochs_completed < 1:
            data.sample()
        assert data.stats.epoch_rows == [ROWS]
    finally:
        data.stop()


@pytest.mark.timeout(120)
def test_column_projection_and_row_filter_reach_read_parquet(ray_session, bc_config, s3_data,
                                                            s3_kwargs):
    columns = ["obs", "actions", "rewards", "new_obs", "terminateds"]
    config = bc_config.offline_data(
        input_=f"{s3_data}/cartpole", input_filesystem="s3", input_filesystem_kwargs=s3_kwargs,
        input_read_method_kwargs={"columns": columns, "filter": pds.field("t") < 100})
    data = OfflineData(config, SPACES).start()
    try:
        batch = data.sample()
        while data.stream.stats.epochs_completed < 1:
            data.sample()
        assert data.stream.stats.epoch_rows == [40 * 100]  # the first 100 steps of 40 episodes
        assert sorted(batch) == sorted([*columns, "truncateds"])  # filled in: all False
        assert not batch["truncateds"].any()
    finally:
        data.stop()


@pytest.mark.timeout(120)
def test_lists_globs_and_callables_read_the_matching_files(ray_session, bc_config, cartpole_data,
                                                          s3_data, s3_kwargs):
    s3 = {"input_filesystem": "s3", "input_filesystem_kwargs": s3_kwargs}
    part_rows = ROWS // PARTS

    def count(**options) -> int:
        return read_input(bc_config.copy().offline_data(**options).data_config(SPACES)).count()

    assert count(input_=[f"{s3_data}/parts/part-0.parquet", f"{BUCKET}/parts/part-3.parquet"],
                 **s3) == 2 * part_rows
    assert count(input_=f"{s3_data}/parts/part-[0-2].parquet", **s3) == 3 * part_rows
    assert count(input_=[str(cartpole_data / "*/*/*.parquet"), str(cartpole_data)]) == 2 * ROWS

    calls = []

    def read_first_file(paths: list[str], **kwargs) -> ray.data.Dataset:
        calls.append((paths, kwargs))
        return ray.data.read_parquet(paths[:1], **kwargs)

    assert count(input_=f"{s3_data}/parts/*.parquet", input_read_method=read_first_file,
                 input_read_method_kwargs={"columns": ["t"]}, **s3) == part_rows
    [(paths, kwargs)] = calls
    assert paths == [f"{BUCKET}/parts/part-{part}.parquet" for part in range(PARTS)]
    assert sorted(kwargs) == ["columns", "filesystem"]
    assert isinstance(kwargs["filesystem"], pafs.S3FileSystem)
    with pytest.raises(ConfigError, match="filesystem is set twice"):
        count(input_=f"{s3_data}/parts", input_read_method_kwargs={"filesystem": None}, **s3)


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_recordings_go_to_s3_uris_and_an_unwritable_output_fails_at_build(
        ray_session, bc_config, s3_data, s3_kwargs, s3_fs):
    config = (bc_config.copy()
              .offline_data(output=f"{s3_data}/recorded", output_filesystem="s3",
                            output_filesystem_kwargs=s3_kwargs, output_write_episodes=False)
              .env_runners(num_cpus_per_env_runner=0).evaluation(evaluation_duration=2))
    with config.build() as algo:
        algo.train()
        assert algo.evaluate()["env_runners"]["num_episodes"] == 2
    written = s3_fs.get_file_info(pafs.FileSelector(f"{BUCKET}/recorded", recursive=True))
    assert [info.path for info in written if info.path.endswith(".parquet")]
    unreachable = bc_config.copy().offline_data(
        output=f"{s3_data}/elsewhere", output_filesystem="s3",
        output_filesystem_kwargs={**s3_kwargs, "endpoint_override": "127.0.0.1:9",
                                  "connect_timeout": 1, "request_timeout": 1})
    with pytest.raises(ConfigError, match="cannot write output='s3://offline-rl/elsewhere' "
                                          "through S3FileSystem: .*output_filesystem_kwargs"):
        unreachable.build()


@pytest.mark.timeout(180)
def test_a_later_s3_file_without_a_column_is_named(ray_session, bc_config, s3_data, s3_kwargs,
                                                   s3_fs):
    """Issue 17: only the first remote file's footer is read at build; Ray Data then reads a
    later file's missing column as nulls, which failed naming the folder and a row in a batch."""
    table = pq.read_table(next(iter(Path(bc_config.input_).rglob("*.parquet")))).slice(0, 600)
    pq.write_table(table.slice(0, 300), f"{BUCKET}/later-lacks/part-0.parquet", filesystem=s3_fs)
    pq.write_table(table.slice(300).drop_columns(["rewards"]),
                   f"{BUCKET}/later-lacks/part-1.parquet", filesystem=s3_fs)
    config = bc_config.training(train_batch_size_per_learner=100).offline_data(
        input_=f"{s3_data}/later-lacks", input_filesystem="s3", input_filesystem_kwargs=s3_kwargs,
        dataset_num_iters_per_learner=None)
    with pytest.raises(DataFormatError, match=r"^s3://offline-rl/later-lacks/part-1\.parquet has "
                                              r"no column 'rewards', which other input files "
                                              r"have"), config.build() as algo:
        algo.train()
