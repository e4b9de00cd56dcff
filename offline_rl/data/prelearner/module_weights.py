"""Module weights for PreLearners whose connectors need the current module (``needs_module``).

The learners ``publish`` their weights to a ``ModuleWeights`` actor after each training
iteration; each PreLearner holds a ``SyncedModule`` that fetches newer weights every
``prelearner_module_synch_period`` calls. Weights travel as numpy arrays (never CUDA tensors),
tagged with the number of optimizer steps they come from, so learners can measure how stale the
batches they train on are.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import numpy as np
import ray

from offline_rl.errors import ConfigError
from offline_rl.names import DEFAULT_MODULE_ID

if TYPE_CHECKING:
    import torch

#: Column PreLearners add to batches built with the module: the weights' version (update count).
WEIGHTS_VERSION = "module_weights_version"


@ray.remote(num_cpus=0)
class ModuleWeights:
    """The latest published weights and their version; ``latest`` waits for the first ones.

    Examples:
        >>> board = ModuleWeights.remote()
        >>> ray.get(board.publish.remote([ray.put({"w": np.zeros(2)})], 7))
        >>> version, [weights] = ray.get(board.latest.remote(-1))
        >>> version, ray.get(weights)["w"].tolist()
        (7, [0.0, 0.0])
        >>> ray.get(board.latest.remote(7))  # nothing newer than version 7
        (7, [])
        >>> ray.kill(board)
    """

    def __init__(self) -> None:
        self._version = -1
        self._weights: list[ray.ObjectRef] = []
        self._published = asyncio.Event()

    async def publish(self, weights: list[ray.ObjectRef], version: int) -> None:
        """Stores ``weights`` (a one-element list, so the reference is kept, not resolved)."""
        self._version, self._weights = version, weights
        self._published.set()

    async def latest(self, known_version: int) -> tuple[int, list[ray.ObjectRef]]:
        """``(version, [weights])`` when newer than ``known_version``, else ``(version, [])``;
        waits until weights were published once."""
        await self._published.wait()
        if self._version > known_version:
            return self._version, self._weights
        return self._version, []


def numpy_state(module: torch.nn.Module) -> dict[str, np.ndarray]:
    """The module's ``state_dict`` as CPU numpy arrays."""
    return {name: value.detach().cpu().numpy() for name, value in module.state_dict().items()}


class SyncedModule:
    """A CPU copy of the learners' module, refreshed from ``ModuleWeights`` every ``period``
    calls of ``get()``.

    Examples:
        >>> import gymnasium as gym, torch
        >>> from offline_rl import RLModuleSpec
        >>> spec = RLModuleSpec(observation_space=gym.spaces.Box(-1, 1, (2,)),
        ...                     action_space=gym.spaces.Discrete(2))
        >>> learners_module, board = spec.build(), ModuleWeights.remote()
        >>> ray.get(board.publish.remote([ray.put(numpy_state(learners_module))], 3))
        >>> synced = SyncedModule(spec.build(), board, period=10)
        >>> module = synced.get()
        >>> synced.version, all(torch.equal(a, b) for a, b in zip(
        ...     module.parameters(), learners_module.parameters()))
        (3, True)
        >>> ray.kill(board)
    """

    def __init__(self, module: Any, weights: ray.actor.ActorHandle, period: int):
        self.module = module
        self.version = -1
        self._weights = weights
        self._period = period
        self._calls = 0

    def get(self) -> Any:
        """The module, after fetching newer weights when a sync is due (always on first use)."""
        if self._calls % self._period == 0 or self.version < 0:
            self.sync()
        self._calls += 1
        return self.module

    def sync(self) -> None:
        """Loads the latest published weights if they are newer than the module's."""
        import torch

        version, weights = ray.get(self._weights.latest.remote(self.version))
        if weights:
            state = ray.get(weights[0])
            self.module.load_state_dict({name: torch.tensor(value)
                                         for name, value in state.items()})
            self.version = version


class LoadedModule:
    """A module with the weights it was given and no further syncs: a PreLearner built alone
    with RLlib's ``module_state`` (``{module_id: weights}``, as the learner's
    ``get_state(component=COMPONENT_RL_MODULE)["rl_module"]`` returns it, or the weights
    alone), in ``SyncedModule``'s interface (``get()``, ``version``).

    Examples:
        >>> import gymnasium as gym, torch
        >>> from offline_rl import RLModuleSpec
        >>> spec = RLModuleSpec(observation_space=gym.spaces.Box(-1, 1, (2,)),
        ...                     action_space=gym.spaces.Discrete(2))
        >>> source = spec.build()
        >>> loaded = LoadedModule(spec.build(), {"default_policy": numpy_state(source)})
        >>> all(torch.equal(a, b) for a, b in zip(loaded.get().parameters(),
        ...                                       source.parameters()))
        True
    """

    #: The weights' version: those given, before any update of this process's.
    version = 0

    def __init__(self, module: Any, module_state: dict[str, Any],
                 module_id: str = DEFAULT_MODULE_ID):
        import torch

        state = module_state.get(module_id, module_state)
        if not isinstance(state, dict):
            raise ConfigError(
                f"module_state must be {{{module_id!r}: weights}} or the weights (a state "
                f"dict), got {type(module_state).__name__}")
        try:
            module.load_state_dict({name: torch.as_tensor(np.asarray(value))
                                    for name, value in state.items()})
        except RuntimeError as error:
            raise ConfigError(f"module_state does not fit the module: {error}") from None
        self.module = module

    def get(self) -> Any:
        """The module."""
        return self.module

