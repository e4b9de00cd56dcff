"""The states of this process's random number generators (Python's, numpy's global and
torch's, CUDA's too when present) as plain JSON data, for checkpoints that resume exactly."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from offline_rl.errors import ConfigError


def random_states() -> dict[str, Any]:
    """The generators' states as lists and numbers (``set_random_states`` restores them).

    Examples:
        >>> states = random_states()
        >>> first = torch.rand(1).item(), np.random.rand(), random.random()
        >>> set_random_states(states)
        >>> (torch.rand(1).item(), np.random.rand(), random.random()) == first
        True
    """
    version, python_state, gauss = random.getstate()
    name, keys, position, has_gauss, cached = np.random.get_state()
    states: dict[str, Any] = {
        "python": [version, list(python_state), gauss],
        "numpy": [name, keys.tolist(), int(position), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state().tolist(),
    }
    if torch.cuda.is_available():
        states["torch_cuda"] = [state.tolist() for state in torch.cuda.get_rng_state_all()]
    return states


def set_random_states(states: dict[str, Any]) -> None:
    """Restores what ``random_states`` returned (CUDA's only where CUDA is present)."""
    version, python_state, gauss = states["python"]
    random.setstate((version, tuple(python_state), gauss))
    name, keys, position, has_gauss, cached = states["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached))
    torch.set_rng_state(torch.tensor(states["torch"], dtype=torch.uint8))
    if "torch_cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(state, dtype=torch.uint8)
                                      for state in states["torch_cuda"]])


def update_global_seed_if_necessary(framework: str | None = None, seed: int | None = None
                                    ) -> None:
    """Seeds Python's, numpy's and torch's generators with ``seed`` (nothing when ``None``),
    as RLlib's ``ray.rllib.utils.debug.update_global_seed_if_necessary``; ``framework`` must
    be ``"torch"`` (or ``None``).

    Examples:
        >>> update_global_seed_if_necessary("torch", seed=42)
        >>> first = torch.rand(1).item(), np.random.rand(), random.random()
        >>> update_global_seed_if_necessary("torch", seed=42)
        >>> (torch.rand(1).item(), np.random.rand(), random.random()) == first
        True
    """
    if framework not in (None, "torch"):
        raise ConfigError(f"update_global_seed_if_necessary(framework={framework!r}): "
                          "offline-rl is torch only; use framework='torch'")
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
