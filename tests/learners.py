"""Learners and connector pieces for the scale-out tests (imported by Ray actors by module path).

Remote learners report what they saw to a named ``Log`` actor, which the test reads back.
"""

from __future__ import annotations

import os

import numpy as np
import ray
import torch
import torch.distributed as dist

from connectors import ConnectorV2
from offline_rl import BCConfig
from offline_rl.algorithms.bc.bc_learner import BCTorchLearner

LOG_NAME = "offline-rl-test-log"


@ray.remote(num_cpus=0)
class Log:
    """Entries appended by learners and PreLearners, read back by the test."""

    def __init__(self) -> None:
        self.entries: list[tuple] = []

    def add(self, entry: tuple) -> None:
        self.entries.append(entry)

    def get(self) -> list[tuple]:
        return list(self.entries)

    def first_call(self, key: str) -> bool:
        """True once per key: lets exactly one process fail on purpose."""
        first = key not in {entry[0] for entry in self.entries}
        self.entries.append((key,))
        return first


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


class RecordingLearner(BCTorchLearner):
    """Logs the row ids (``obs[:, 0]``) of each batch and a checksum of the weights after each
    update: ``("rows", rank, ids)`` and ``("weights", rank, step, checksum)``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = ray.get_actor(LOG_NAME)
        self.steps = 0

    def update(self, batch):
        if batch is not None:
            self.log.add.remote(("rows", rank(), batch["obs"][:, 0].astype(np.int64).tolist()))
        metrics = super().update(batch)
        if metrics is not None:
            weights = torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])
            self.log.add.remote(("weights", rank(), self.steps, weights.numpy().tobytes()))
            self.steps += 1
        return metrics


class DyingLearner(BCTorchLearner):
    """Learner 1 exits its process at its third update."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps = 0

    def update(self, batch):
        self.steps += 1
        if rank() == 1 and self.steps == 3:
            os._exit(1)
        return super().update(batch)


class RecordingBCConfig(BCConfig):
    def get_default_learner_class(self) -> type:
        return RecordingLearner


class DyingBCConfig(BCConfig):
    def get_default_learner_class(self) -> type:
        return DyingLearner


class AddModuleLogits(ConnectorV2):
    """Needs the module: adds its action logits for each transition's observation."""

    needs_module = True
    needs_episodes = True

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        obs = np.concatenate([np.asarray(e.get_observations())[:-1] for e in episodes])
        with torch.no_grad():
            out = rl_module.forward_inference({"obs": torch.as_tensor(obs, dtype=torch.float32)})
        batch["module_logits"] = out["action_dist_inputs"].numpy()
        return batch


def add_module_logits(observation_space, action_space) -> ConnectorV2:
    """``learner_connector`` factory for configs (placed before the default pieces)."""
    return AddModuleLogits(observation_space, action_space)
