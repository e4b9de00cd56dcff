"""How a batch is keyed by module id when a pipeline runs with a ``MultiRLModule``."""

from __future__ import annotations

from typing import Any

from offline_rl.errors import ConfigError
from offline_rl.models.multi_rl_module import MultiRLModule
from offline_rl.names import ModuleID


def single_module_id(rl_module: Any) -> ModuleID | None:
    """The id a single-agent batch goes under: the one module of a ``MultiRLModule``;
    ``None`` for any other module (offline-rl's learners take flat columns). A
    ``MultiRLModule`` of several modules is refused (multi-agent training is not supported
    yet)."""
    if not isinstance(rl_module, MultiRLModule):
        return None
    if len(rl_module) != 1:
        raise ConfigError(f"a single-agent batch goes to one module, but the MultiRLModule has "
                          f"{sorted(rl_module)}; multi-agent training is not supported yet")
    return next(iter(rl_module))


def is_module_keyed(batch: dict[str, Any], rl_module: Any) -> bool:
    """Whether ``batch`` is already ``{module_id: columns}`` for ``rl_module``'s modules."""
    return (isinstance(rl_module, MultiRLModule) and bool(batch)
            and all(key in rl_module and isinstance(value, dict)
                    for key, value in batch.items()))
