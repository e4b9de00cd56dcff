"""The ``rl_module`` section: the network the algorithm trains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offline_rl.errors import ConfigError
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.multi_rl_module import MultiRLModuleSpec
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.settings.multi_agent import MODULE_ID
from offline_rl.settings.options import Rule, Section, option


def model_config_problem(value: Any) -> str | None:
    """What ``DefaultModelConfig`` says is wrong with ``value``, or ``None``."""
    try:
        DefaultModelConfig.from_dict(value)
    except (TypeError, ConfigError) as error:
        return str(error)
    return None


def _is_module_spec(value: Any) -> bool:
    if isinstance(value, MultiRLModuleSpec):
        specs = value.rl_module_specs
        return isinstance(specs, dict) and bool(specs) and all(
            isinstance(module_id, str) and MODULE_ID.fullmatch(module_id)
            and isinstance(spec, RLModuleSpec) for module_id, spec in specs.items())
    return value is None or isinstance(value, RLModuleSpec)


@dataclass
class RLModuleConfig(Section):
    """See ``AlgorithmConfig.rl_module``.

    Examples:
        >>> field, problem = RLModuleConfig(rl_module_spec="x").problems()[0]
        >>> problem
        "must be None, an RLModuleSpec or a MultiRLModuleSpec of them by module id, got 'x'"
    """

    #: ``DefaultModelConfig`` keys of the default module (``fcnet_hiddens``, ...).
    model_config: dict[str, Any] = option({}, model_config_problem)
    #: A full module spec instead (its empty fields are filled in), or one per module of a
    #: multi-agent config (``MultiRLModuleSpec``; its modules are ``multi_agent``'s policies).
    rl_module_spec: RLModuleSpec | MultiRLModuleSpec | None = option(None, Rule(
        "None, an RLModuleSpec or a MultiRLModuleSpec of them by module id",
        _is_module_spec))
