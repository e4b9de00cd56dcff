"""Configs as plain data: the ``{"algorithm": ..., section: {field: value}}`` layout that
``AlgorithmConfig.to_dict``/``from_dict`` use, and YAML files of it. Reading never imports
code a file names: the class is the registered one of ``algorithm``, or a ``config_class``
already defined in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import yaml

from offline_rl.algorithms.registry import get_algorithm_config_class, saved_config_class
from offline_rl.errors import ConfigError
from offline_rl.import_path import import_path
from offline_rl.spaces import space_from_dict, space_to_dict

#: Builder methods, in the order ``to_dict`` writes their sections.
SECTIONS = ("environment", "training", "learners", "resources", "env_runners", "offline_data",
            "evaluation", "checkpointing", "rl_module", "debugging")
SPACE_FIELDS = ("observation_space", "action_space")


def config_to_dict(config: Any) -> dict[str, Any]:
    """``config`` (an ``AlgorithmConfig``) in the plain layout; spaces as RLlib's space dicts,
    and the class's import path when it is not the registered one of its name."""
    result: dict[str, Any] = {"algorithm": config.algo_name}
    if not config.algo_name or get_algorithm_config_class(config.algo_name) is not type(config):
        result["config_class"] = import_path(type(config))
    for section in SECTIONS:
        values = {name: getattr(config, name) for name in config.section_fields(section)}
        for name in SPACE_FIELDS:
            if isinstance(values.get(name), gym.Space):
                values[name] = space_to_dict(values[name])
        result[section] = values
    return result


def config_from_dict(values: dict[str, Any], default_class: type) -> Any:
    """The config ``config_to_dict`` wrote (``default_class`` when it names no algorithm);
    unknown sections or keys are ``ConfigError``s listing the valid ones."""
    values = dict(values)
    name = values.pop("algorithm", None) or default_class.algo_name
    config = saved_config_class(name, values.pop("config_class", None), default_class)()
    for section, options in values.items():
        if section not in SECTIONS:
            raise ConfigError(f"unknown config section {section!r}; sections are "
                              f"{['algorithm', *SECTIONS]}")
        options = dict(options or {})
        valid = config.section_fields(section)
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ConfigError(f"unknown key(s) {unknown} in section {section!r}; valid keys: "
                              f"{valid}")
        for space in SPACE_FIELDS:
            if isinstance(options.get(space), dict):
                options[space] = space_from_dict(options[space])
        getattr(config, section)(**options)
    return config


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML config file's contents (a mapping of sections)."""
    try:
        values = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is no plain YAML config ({str(error).splitlines()[0]}); "
                          "config files hold mappings, lists, strings and numbers only (tags "
                          "that build Python objects are refused)") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a mapping of config sections, got "
                          f"{type(values).__name__}")
    return values


def write_config_file(values: dict[str, Any], path: str | Path) -> None:
    """Writes ``config_to_dict``'s layout as YAML; a value YAML cannot hold is a
    ``ConfigError`` naming its field."""
    Path(path).write_text(yaml.safe_dump(_yaml_safe(values), sort_keys=False))


def _yaml_safe(value: Any, where: str = "config") -> Any:
    if isinstance(value, dict):
        return {k: _yaml_safe(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_yaml_safe(v, where) for v in value]
    if isinstance(value, type):
        return f"{value.__module__}:{value.__qualname__}"
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ConfigError(f"{where} = {value!r} cannot be written to YAML; give classes and "
                      "functions as 'package.module:Name' strings")
