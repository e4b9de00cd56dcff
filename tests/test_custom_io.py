"""RLlib's old-stack custom input and output API: readers built per read task from an
``IOContext`` feed the Ray Data pipeline; writers get every recorded episode."""

from __future__ import annotations

import json
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest

from offline_rl import (
    AlgorithmConfig,
    BCConfig,
    InputReader,
    NoopOutput,
    ShuffledInput,
    register_input,
)
from offline_rl.data.source.input_reader import read_input
from offline_rl.errors import ConfigError, DataFormatError, InputReaderError
from offline_rl.recording.recorder import Recorder
from offline_rl.recording.sample_batch_builder import SampleBatch
from tests.custom_io import (
    BreaksMidway,
    CountingWriter,
    CustomInputReader,
    GarbageReader,
    WideObservations,
    input_creator,
)

SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
TRAINING = {"train_batch_size_per_learner": 64}


def _rows(config: AlgorithmConfig) -> list[dict]:
    return read_input(config.data_config(SPACES)).take_all()


def test_the_seeds_registered_input_trains_bc_from_an_old_stack_dict(ray_session):
    register_input("custom_input", input_creator)
    with pytest.warns(UserWarning, match="old-stack key") as caught:
        config = AlgorithmConfig.from_dict({
            "algorithm": "BC", "env": "CartPole-v1", "input": "custom_input",
            "input_config": {"episodes": 6, "max_steps": 40}, "train_batch_size": 64,
            "dataset_num_iters_per_learner": 2})
    assert "offline_data(input_='custom_input')" in str(caught[0].message)
    assert config.sections.offline_data.input_config == {"episodes": 6, "max_steps": 40}
    with config.build() as algo:
        for _ in range(2):
            result = algo.train()
    assert result["learners"]["__all_modules__"]["num_env_steps_trained"] == 2 * 64
    assert result["data"]["dropped"] == {}


def test_a_callable_input_trains_bc_with_two_readers_each_with_its_worker_index(ray_session):
    config = (BCConfig().environment("CartPole-v1").training(**TRAINING)
              .offline_data(input_=input_creator, input_config={"episodes": 4},
                            input_read_method_kwargs={"override_num_blocks": 2},
                            dataset_num_iters_per_learner=1))
    rows = _rows(config)
    assert sorted(row["eps_id"][0] for row in rows) == [f"{w}-{n}" for w in (0, 1)
                                                        for n in range(4)]
    assert {row["path"].split(",")[0] for row in rows} == {
        "input reader ShuffledInput (worker_index 0)",
        "input reader ShuffledInput (worker_index 1)"}
    with config.build() as algo:
        assert algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"] == 64


def test_an_endless_reader_is_read_for_input_reader_max_rows_and_stop_iteration_ends_early(
        ray_session):
    endless = (BCConfig().environment("CartPole-v1").offline_data(
        input_=CustomInputReader, input_config={"max_steps": 30}, input_reader_max_rows=100))
    steps = [len(row["actions"]) for row in _rows(endless)]
    assert 100 <= sum(steps) < 100 + 30
    three = endless.copy().offline_data(input_config={"episodes": 3}, input_reader_max_rows=1000)
    assert [row["eps_id"][0] for row in _rows(three)] == ["0-0", "0-1", "0-2"]


def test_shuffled_input_shuffles_through_a_sliding_buffer():
    class Numbers(InputReader):
        def __init__(self):
            self.n = 0

        def next(self):
            if self.n == 20:
                raise StopIteration
            self.n += 1
            return {"t": [self.n]}

    def drain(reader):
        out = []
        while True:
            try:
                out.append(reader.next()["t"][0])
            except StopIteration:
                return out

    assert drain(ShuffledInput(Numbers())) == list(range(1, 21))
    shuffled = drain(ShuffledInput(Numbers(), n=5, seed=0))
    assert sorted(shuffled) == list(range(1, 21)) and shuffled != list(range(1, 21))
    # A sliding buffer of 5: batch k comes out no sooner than 4 places before its turn.
    assert all(position >= value - 5 for position, value in enumerate(shuffled))


def test_an_unregistered_input_name_is_a_config_error_naming_the_registered_ones():
    register_input("custom_input", input_creator)
    with pytest.raises(ConfigError, match=r"input 'cutsom_input' is neither a registered input.*"
                                          r"registered inputs: \[.*'custom_input'"):
        AlgorithmConfig.from_dict({"algorithm": "BC", "env": "CartPole-v1",
                                   "input": "cutsom_input"})
    with pytest.raises(ConfigError, match=r"register_input\(3, None\)"):
        register_input(3, None)


def test_a_reader_returning_garbage_fails_naming_the_reader(ray_session):
    config = (BCConfig().environment("CartPole-v1").training(**TRAINING)
              .offline_data(input_=GarbageReader, dataset_num_iters_per_learner=1))
    with config.build() as algo, pytest.raises(
            DataFormatError, match=r"input reader GarbageReader \(worker_index 0\), batch 0: "
                                   r"next\(\) returned str 'not a batch', but .* SampleBatch"):
        algo.train()


def test_a_reader_with_the_wrong_observation_shape_fails_naming_the_reader(ray_session):
    config = (BCConfig().environment("CartPole-v1").training(**TRAINING)
              .offline_data(input_=WideObservations, input_config={"episodes": 2},
                            dataset_num_iters_per_learner=1))
    with config.build() as algo, pytest.raises(
            DataFormatError, match=r"input reader WideObservations \(worker_index 0\), batch 0"
                                   r".*\(3,\).*\(4,\)"):
        algo.train()


def test_a_custom_output_writer_receives_every_recorded_episode(ray_session, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AlgorithmConfig.from_dict({
            "algorithm": "BC", "env": "CartPole-v1", "output": CountingWriter,
            "output_config": {"folder": str(tmp_path)}, "num_workers": 2})
    config.env_runners(num_cpus_per_env_runner=0).debugging(seed=0)
    with Recorder(config.recorder_config(), lambda obs: (obs[:, 2] > 0).astype(np.int64)) as rec:
        stats = rec.record(5, progress=False)
        assert rec.stop() == []
    written = [json.loads(path.read_text())["rows"] for path in tmp_path.glob("*.json")]
    assert len(written) == stats["num_episodes"] == 5
    assert sum(written) == stats["num_env_steps"]
    assert {path.name.split("-")[0] for path in tmp_path.glob("*.json")} == {"0", "1"}
    assert NoopOutput().write(SampleBatch()) is None


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_reader_that_hangs_fails_train_within_the_timeout_naming_the_reader(ray_session):
    config = (BCConfig().environment("CartPole-v1").training(**TRAINING)
              .offline_data(input_=BreaksMidway, input_config={"break_at": 1, "hang": True},
                            input_reader_timeout_s=2, dataset_num_iters_per_learner=1))
    with config.build() as algo:
        started = time.monotonic()
        with pytest.raises(InputReaderError, match=r"input reader BreaksMidway \(worker_index "
                                                   r"0\), next\(\) call 1 did not return within "
                                                   r"input_reader_timeout_s=2 s"):
            algo.train()
        assert time.monotonic() - started < 60  # hung for ever before


@pytest.mark.slow
def test_a_reader_that_raises_midway_is_named_with_its_error_as_the_cause(ray_session):
    config = (BCConfig().environment("CartPole-v1").training(**TRAINING)
              .offline_data(input_=BreaksMidway, input_config={"break_at": 2},
                            dataset_num_iters_per_learner=1))
    with config.build() as algo, pytest.raises(
            InputReaderError, match=r"^input reader BreaksMidway \(worker_index 0\), next\(\) "
                                    r"call 2 raised RuntimeError: the session store went away "
                                    r"\(at .*custom_io.py:\d+ in next\)") as caught:
        algo.train()
    assert type(caught.value.__cause__) is RuntimeError
    assert str(caught.value.__cause__) == "the session store went away"


def test_the_reader_timeout_is_checked():
    with pytest.raises(ConfigError, match=r"input_reader_timeout_s.*must be a number > 0, got 0"):
        BCConfig().environment("CartPole-v1").offline_data(
            input_=BreaksMidway, input_reader_timeout_s=0).validate()
