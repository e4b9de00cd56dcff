"""Custom input readers and output writers for tests/test_custom_io.py (imported by Ray's
workers by their module path): the seed's example, a scripted CartPole policy's episodes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np

from offline_rl import InputReader, IOContext, OutputWriter, ShuffledInput
from offline_rl.recording.sample_batch_builder import SampleBatch, SampleBatchBuilder


def scripted(obs: np.ndarray) -> int:
    """Pushes the cart under the pole: balances CartPole for hundreds of steps."""
    return int(obs[2] + 0.5 * obs[3] > 0)


class CustomInputReader(InputReader):
    """One SampleBatch per CartPole episode of the scripted policy (at most ``max_steps``
    steps), episode ids made of the reader's ``worker_index``; ``episodes`` then stops."""

    def __init__(self, ioctx: IOContext):
        self.worker_index = ioctx.worker_index
        self.episodes = ioctx.input_config.get("episodes")
        self.max_steps = ioctx.input_config.get("max_steps", 50)
        self.env = gym.make("CartPole-v1")
        self.count = 0

    def next(self) -> SampleBatch:
        if self.episodes is not None and self.count >= self.episodes:
            raise StopIteration
        builder = SampleBatchBuilder()
        obs, _ = self.env.reset(seed=1000 * self.worker_index + self.count)
        for t in range(self.max_steps):
            action = scripted(obs)
            new_obs, reward, terminated, _, _ = self.env.step(action)
            builder.add_values(t=t, eps_id=f"{self.worker_index}-{self.count}", obs=obs,
                               actions=action, rewards=reward, new_obs=new_obs,
                               terminateds=terminated, truncateds=t == self.max_steps - 1)
            obs = new_obs
            if terminated:
                break
        self.count += 1
        return builder.build_and_reset()


def input_creator(ioctx: IOContext) -> InputReader:
    return ShuffledInput(CustomInputReader(ioctx))


class GarbageReader(InputReader):
    def __init__(self, ioctx: IOContext):
        pass

    def next(self):
        return "not a batch"


class WideObservations(CustomInputReader):
    def next(self) -> SampleBatch:
        batch = super().next()
        batch["obs"] = batch["new_obs"] = np.zeros((batch.count, 3), np.float32)
        return batch


class BreaksMidway(CustomInputReader):
    """Returns episodes until ``next()`` call ``input_config["break_at"]``, which raises
    ``RuntimeError`` or, with ``input_config["hang"]``, blocks for ever."""

    def __init__(self, ioctx: IOContext):
        super().__init__(ioctx)
        self.break_at = ioctx.input_config["break_at"]
        self.hang = ioctx.input_config.get("hang", False)

    def next(self) -> SampleBatch:
        if self.count == self.break_at:
            if self.hang:
                threading.Event().wait()
            raise RuntimeError("the session store went away")
        return super().next()


class CountingWriter(OutputWriter):
    """Writes one JSON file per batch into ``output_config["folder"]``: its rows and writer."""

    def __init__(self, ioctx: IOContext):
        self.folder = Path(ioctx.output_config["folder"])
        self.worker_index = ioctx.worker_index
        self.batches = 0

    def write(self, sample_batch: SampleBatch) -> None:
        name = f"{self.worker_index}-{self.batches}.json"
        (self.folder / name).write_text(json.dumps({"rows": sample_batch.count}))
        self.batches += 1
