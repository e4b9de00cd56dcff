"""The open registry of algorithms: the names YAML configs and checkpoints use (``algorithm:
BC``), each bound to its config class, imported only when first asked for.

Examples:
    >>> from offline_rl import AlgorithmConfig
    >>> class MyBCConfig(AlgorithmConfig):
    ...     algo_name = "MyBC"
    >>> get_algorithm_config_class("MyBC") is MyBCConfig   # defining it registered it
    True
    >>> register_algorithm("Lazy", "my_package.my_algorithm:MyConfig")  # imported on first use
    >>> "BC" in registered_algorithms()
    True
    >>> get_algorithm_config_class("DiscreteCQL").__name__   # a built-in one
    'DiscreteCQLConfig'
"""

from __future__ import annotations

import sys

from offline_rl.errors import ConfigError
from offline_rl.import_path import import_object, import_path

#: The built-in algorithms: each name (``BC``), the ``Algorithm`` subclass of that name and
#: its config (``BCConfig``), and the module defining both, imported only when first used.
#: ``offline_rl`` exports both classes, and the registry, the command line and Ray Tune know
#: the algorithm by its name.
BUILT_IN_ALGORITHMS: dict[str, str] = {
    "BC": "offline_rl.algorithms.bc.bc",
    "IQL": "offline_rl.algorithms.iql.iql",
    "MARWIL": "offline_rl.algorithms.marwil.marwil",
    "TD3BC": "offline_rl.algorithms.td3bc.td3bc",
    "CQL": "offline_rl.algorithms.cql.cql",
    "DiscreteCQL": "offline_rl.algorithms.cql.discrete_cql",
    "DQN": "offline_rl.algorithms.dqn.dqn",
}

_REGISTRY: dict[str, type | str] = {name: f"{module}:{name}Config"
                                    for name, module in BUILT_IN_ALGORITHMS.items()}

#: Every config class defined in this process, by ``"package.module:Name"``: a saved config
#: comes back as its own class when that class is defined (nothing is imported to find it).
_DEFINED: dict[str, type] = {}


def register_algorithm(name: str, config_class: type | str) -> None:
    """Makes ``name`` mean ``config_class`` (an ``AlgorithmConfig`` subclass, or its
    ``"package.module:Name"`` path, imported on first use) in configs and checkpoints."""
    if not isinstance(config_class, type | str):
        raise ConfigError(f"register_algorithm({name!r}, ...) takes an AlgorithmConfig subclass "
                          f"or its 'package.module:Name' path, got {config_class!r}")
    _REGISTRY[name] = config_class


def registered_algorithms() -> list[str]:
    """The registered algorithm names."""
    return sorted(_REGISTRY)


def get_algorithm_config_class(name: str) -> type:
    """The config class registered under ``name`` (e.g. ``"BC"``), imported if need be."""
    try:
        config_class = _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown algorithm {name!r}; known: {registered_algorithms()}. "
                          "Register your own with register_algorithm(name, config_class)"
                          ) from None
    if isinstance(config_class, str):
        config_class = _REGISTRY[name] = import_object(config_class)
    return config_class


def note_config_class(config_class: type) -> None:
    """Called for each ``AlgorithmConfig`` subclass as it is defined: remembers it, and
    registers its own ``algo_name`` if that name is still free."""
    _DEFINED[import_path(config_class)] = config_class
    name = vars(config_class).get("algo_name")
    if name and name not in _REGISTRY:
        _REGISTRY[name] = config_class
    register_config_classes_with_tune()


def register_config_classes_with_tune() -> None:
    """Once ``ray.tune`` is imported, makes every config class defined so far one of Tune's
    configs (``_Config``), which ``tune.Tuner(param_space=config)`` turns into a dict with
    ``to_dict``; without Tune, does nothing (and never imports it)."""
    tune = sys.modules.get("ray.tune.tune")
    if tune is not None:
        for config_class in _DEFINED.values():
            tune._Config.register(config_class)


def saved_config_class(name: str, saved_class: str | None, default: type) -> type:
    """The class to rebuild a saved config as: the one registered under ``name`` (``default``
    without a name), or ``saved_class`` (the ``"package.module:Name"`` it was saved from) when
    that class is defined in this process."""
    registered = get_algorithm_config_class(name) if name else default
    if saved_class is None or saved_class == import_path(registered):
        return registered
    if saved_class in _DEFINED:
        return _DEFINED[saved_class]
    raise ConfigError(
        f"this config was saved from {saved_class}, which is not defined in this process: "
        "import the module that defines it first (offline-rl never imports code named in a "
        "file), register it with register_algorithm(), or pass the config yourself")
