"""``MultiRLModule`` and ``MultiRLModuleSpec``: RLlib's modules keyed by module id.

offline-rl trains one module (``DEFAULT_MODULE_ID``); these give code written for RLlib, where
a learner's module is always a ``MultiRLModule``, the names it uses. Neither imports torch
until a spec builds its modules.

Examples:
    >>> import gymnasium as gym
    >>> from offline_rl.models.rl_module_spec import RLModuleSpec
    >>> spec = MultiRLModuleSpec(rl_module_specs={"default_policy": RLModuleSpec(
    ...     observation_space=gym.spaces.Box(-1, 1, (2,)), action_space=gym.spaces.Discrete(3))})
    >>> module = spec.build()
    >>> list(module), spec.action_space
    (['default_policy'], Discrete(3))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from offline_rl.errors import ConfigError, UnknownModuleError
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.names import ModuleID


class MultiRLModule(Mapping[ModuleID, Any]):
    """Modules by id (a mapping, not itself a torch module: move or call each module).
    ``module[module_id]`` is one of them; an unknown id raises
    ``UnknownModuleError`` naming those there are. ``get_state``/``set_state`` hold each
    module's ``state_dict``.

    Examples:
        >>> module = MultiRLModule({"default_policy": object()})
        >>> module["other"]
        Traceback (most recent call last):
        ...
        offline_rl.errors.UnknownModuleError: no module 'other'; the modules are ['default_policy']
    """

    def __init__(self, modules: Mapping[ModuleID, Any]):
        self._modules = dict(modules)

    def __getitem__(self, module_id: ModuleID) -> Any:
        if module_id not in self._modules:
            raise UnknownModuleError(f"no module {module_id!r}; the modules are "
                                     f"{sorted(self._modules)}")
        return self._modules[module_id]

    def __iter__(self) -> Iterator[ModuleID]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def get_state(self) -> dict[ModuleID, Any]:
        """Each module's ``state_dict``."""
        return {module_id: module.state_dict() for module_id, module in self._modules.items()}

    def set_state(self, state: Mapping[ModuleID, Any]) -> None:
        """Loads ``state`` (as ``get_state`` returns) into the modules it names."""
        for module_id, module_state in state.items():
            self[module_id].load_state_dict(module_state)


@dataclass
class MultiRLModuleSpec:
    """One ``RLModuleSpec`` per module id (``rl_module_specs``). With a single module, its
    ``observation_space`` and ``action_space`` are the spec's (as RLlib reads them)."""

    rl_module_specs: dict[ModuleID, RLModuleSpec] = field(default_factory=dict)

    def build(self) -> MultiRLModule:
        """Builds every module (imports torch)."""
        return MultiRLModule({module_id: spec.build()
                              for module_id, spec in self.rl_module_specs.items()})

    @property
    def observation_space(self) -> gym.Space | None:
        """The single module's observation space."""
        return self._single().observation_space

    @property
    def action_space(self) -> gym.Space | None:
        """The single module's action space."""
        return self._single().action_space

    def _single(self) -> RLModuleSpec:
        if len(self.rl_module_specs) != 1:
            raise ConfigError(f"MultiRLModuleSpec has the modules {sorted(self.rl_module_specs)}"
                              "; spaces are read from a spec with exactly one module")
        return next(iter(self.rl_module_specs.values()))


def module_spec_of(spec: RLModuleSpec | MultiRLModuleSpec | None,
                   module_id: ModuleID) -> RLModuleSpec | None:
    """The spec ``rl_module(rl_module_spec=...)`` gives ``module_id``: a ``MultiRLModuleSpec``'s
    entry for it (``None`` where it names other modules only), or the one ``RLModuleSpec``
    every module shares (as RLlib copies it for each).

    Examples:
        >>> specs = MultiRLModuleSpec(rl_module_specs={"m1": RLModuleSpec(module_class="a:B")})
        >>> module_spec_of(specs, "m1").module_class, module_spec_of(specs, "m2")
        ('a:B', None)
    """
    if isinstance(spec, MultiRLModuleSpec):
        return spec.rl_module_specs.get(module_id)
    return spec
