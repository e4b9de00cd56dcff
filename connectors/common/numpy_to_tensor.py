"""Turns the numpy train batch into torch tensors on the learner's device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from connectors.connector_v2 import ConnectorV2


class NumpyToTensor(ConnectorV2):
    """Converts every numeric numpy column into a ``torch.Tensor`` on ``device``.

    Runs in the learner process (never inside Ray Data), so nothing torch- or CUDA-specific crosses
    the data boundary. On CUDA devices host memory is pinned first so the copy is asynchronous.
    Read-only arrays (zero-copy views of Ray's object store) are copied, so tensors own writable
    memory. Non-numeric columns (strings, objects) are left as they are. A batch keyed by
    module id (``{module_id: columns}``) has each module's columns converted, so RLlib's
    ``as_learner_connector`` (learner batches are keyed so) needs no different handling.

    Examples:
        >>> import numpy as np
        >>> out = NumpyToTensor()(rl_module=None, batch={"obs": np.zeros((2, 4))}, episodes=[])
        >>> out["obs"].shape
        torch.Size([2, 4])
    """

    needs_episodes = False  # reads only the flat batch

    def __init__(self, input_observation_space=None, input_action_space=None, *,
                 device: str | torch.device = "cpu", pin_memory: bool | None = None,
                 as_learner_connector: bool = False, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.as_learner_connector = as_learner_connector
        self.device = torch.device(device)
        self.pin_memory = self.device.type == "cuda" if pin_memory is None else pin_memory

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        return {column: self._to_tensor(value) for column, value in batch.items()}

    def _to_tensor(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {column: self._to_tensor(inner) for column, inner in value.items()}
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
            return value
        if not value.flags.writeable:
            value = value.copy()
        tensor = torch.from_numpy(np.ascontiguousarray(value))
        if self.device.type == "cpu":
            return tensor
        if self.pin_memory:
            tensor = tensor.pin_memory()
        return tensor.to(self.device, non_blocking=self.pin_memory)
