"""The ``rl_module`` section: the network the algorithm trains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offline_rl.errors import ConfigError
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.settings.options import Rule, Section, option


def model_config_problem(value: Any) -> str | None:
    """What ``DefaultModelConfig`` says is wrong with ``value``, or ``None``."""
    try:
        DefaultModelConfig.from_dict(value)
    except (TypeError, ConfigError) as error:
        return str(error)
    return None


@dataclass
class RLModuleConfig(Section):
    """See ``AlgorithmConfig.rl_module``.

    Examples:
        >>> RLModuleConfig(rl_module_spec="x").problems()
        [('rl_module_spec', "must be None or an RLModuleSpec, got 'x'")]
    """

    #: ``DefaultModelConfig`` keys of the default module (``fcnet_hiddens``, ...).
    model_config: dict[str, Any] = option({}, model_config_problem)
    #: A full module spec instead (its empty fields are filled in).
    rl_module_spec: RLModuleSpec | None = option(None, Rule(
        "None or an RLModuleSpec",
        lambda value: value is None or isinstance(value, RLModuleSpec)))
