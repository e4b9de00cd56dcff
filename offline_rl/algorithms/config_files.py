"""Configs as plain data: the ``{"algorithm": ..., section: {field: value}}`` layout that
``AlgorithmConfig.to_dict``/``from_dict`` use, and YAML files of it.

Reading never imports or calls code a file names: the config class is the registered one of
``algorithm``, or a ``config_class`` already defined in this process; a class named by a field
(``prelearner_class``, ``learner_connector``, an estimator's ``type``, ...) is looked up in the
modules this process has imported and must subclass what the field takes; an env id's
``module:`` prefix must name an imported module. YAML files are read within a size cap, as
UTF-8, with a bounded number of aliases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import yaml

from offline_rl.algorithms.flat_config import sectioned
from offline_rl.algorithms.registry import get_algorithm_config_class, saved_config_class
from offline_rl.errors import ConfigError
from offline_rl.file_checks import read_checked_bytes
from offline_rl.import_path import import_path, imported_module, resolve_class
from offline_rl.settings.sections import LAYOUT
from offline_rl.spaces import space_from_dict, space_to_dict

SPACE_FIELDS = ("observation_space", "action_space")


def config_to_dict(config: Any) -> dict[str, Any]:
    """``config`` (an ``AlgorithmConfig``) in the plain layout; spaces as RLlib's space dicts,
    and the class's import path when it is not the registered one of its name."""
    result: dict[str, Any] = {"algorithm": config.algo_name}
    if not config.algo_name or get_algorithm_config_class(config.algo_name) is not type(config):
        result["config_class"] = import_path(type(config))
    for section in LAYOUT:
        values = {name: value for part in config.sections.parts(section)
                  for name, value in part.to_dict().items()}
        for name in SPACE_FIELDS:
            if isinstance(values.get(name), gym.Space):
                values[name] = space_to_dict(values[name])
        result[section] = values
    return result


def config_from_dict(values: dict[str, Any], default_class: type) -> Any:
    """The config ``config_to_dict`` wrote (``default_class`` when it names no algorithm); keys
    outside the sections are RLlib's flat keys, old-stack ones included (``flat_config``);
    unknown sections or keys are ``ConfigError``s listing the valid ones."""
    values = dict(values)
    name = values.pop("algorithm", None) or default_class.algo_name
    config = saved_config_class(name, values.pop("config_class", None), default_class)()
    return update_config(config, values)


def update_config(config: Any, values: dict[str, Any]) -> Any:
    """``config`` with ``values`` set: sections of ``config_to_dict``'s layout, and flat keys
    (``flat_config.sectioned``) beside them; a key given both ways is a ``ConfigError``."""
    flat = {key: value for key, value in values.items() if key not in LAYOUT}
    sections = {key: value for key, value in values.items() if key in LAYOUT}
    for section, options in sectioned(flat, config).items():
        given = sections.get(section) or {}
        if not isinstance(given, dict):
            continue  # named below
        if set(given) & set(options):
            raise ConfigError(f"{sorted(set(given) & set(options))} set both in section "
                              f"{section!r} and as flat keys; set each once")
        sections[section] = {**given, **options}
    for section, options in sections.items():
        if not isinstance(options, dict | None):
            raise ConfigError(f"section {section!r} must be a mapping of keys to values, got "
                              f"{type(options).__name__} {options!r}")
        options = dict(options or {})
        valid = config.section_options(section)
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ConfigError(f"unknown key(s) {unknown} in section {section!r}; valid keys: "
                              f"{valid}")
        for space in SPACE_FIELDS:
            if isinstance(options.get(space), dict):
                options[space] = space_from_dict(options[space])
        getattr(config, section)(**resolve_named(options, section))
    return config


def config_from_file(path: str | Path, default_class: type) -> Any:
    """The config in the YAML file ``path`` (``read_config_file``, then ``config_from_dict``);
    a ``ConfigError`` names the file."""
    values = read_config_file(path)
    try:
        return config_from_dict(values, default_class)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error.message}") from None


def named_class_bases() -> dict[str, type]:
    """The fields that may name a class, and the class each name must subclass."""
    from connectors import ConnectorV2
    from offline_rl.data.pipeline.offline_data import OfflineData
    from offline_rl.data.prelearner.prelearner import OfflinePreLearner
    from offline_rl.episodes.replay_buffer import EpisodeReplayBuffer

    return {"learner_connector": ConnectorV2, "prelearner_class": OfflinePreLearner,
            "prelearner_buffer_class": EpisodeReplayBuffer, "offline_data_class": OfflineData}


def resolve_named(options: dict[str, Any], where: str) -> dict[str, Any]:
    """``options`` with each class named by a string replaced by the class (found without
    importing, see ``resolve_class``), in ``evaluation_config`` and the estimators' ``type``
    too; an env id's ``module:`` prefix must name an imported module."""
    from offline_rl.evaluation.off_policy import OffPolicyEstimator

    resolved = dict(options)
    for field, base in named_class_bases().items():
        if isinstance(resolved.get(field), str):
            resolved[field] = resolve_class(resolved[field], base, f"{where}.{field}")
    for field, value in resolved.items():
        if field.endswith("_kwargs") and "runtime_env" in _keys(value):
            raise ConfigError(f"{where}.{field} sets a Ray runtime_env, which installs and runs "
                              "code (pip packages, modules, env vars); a config file cannot. "
                              "Give it in Python, or to ray.init / ray job submit")
    env = resolved.get("env")
    if isinstance(env, str) and ":" in env:
        imported_module(env.partition(":")[0], f"{where}.env names {env!r}, but")
    methods = resolved.get("off_policy_estimation_methods")
    if isinstance(methods, dict):
        resolved["off_policy_estimation_methods"] = {
            name: {**spec, "type": resolve_class(spec["type"], OffPolicyEstimator,
                                                 f"{where}.off_policy_estimation_methods."
                                                 f"{name}.type")}
            if isinstance(spec, dict) and ":" in str(spec.get("type", "")) else spec
            for name, spec in methods.items()}
    if isinstance(resolved.get("evaluation_config"), dict):
        resolved["evaluation_config"] = resolve_named(resolved["evaluation_config"],
                                                      f"{where}.evaluation_config")
    return resolved


#: Largest YAML config read, in bytes (configs are a few KiB).
MAX_CONFIG_BYTES = 1024 * 1024
#: Most values a YAML config may hold once its aliases (``*name``) are expanded: each alias
#: stands for a whole subtree, so a few nested ones expand into billions (the "billion laughs").
MAX_CONFIG_VALUES = 1_000_000


def _keys(value: Any) -> set[str]:
    """Every key of the dicts nested in ``value``."""
    if isinstance(value, dict):
        return set(value).union(*(_keys(nested) for nested in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(nested) for nested in value))
    return set()


def read_config_file(path: str | Path, *, max_bytes: int = MAX_CONFIG_BYTES,
                     max_values: int = MAX_CONFIG_VALUES) -> dict[str, Any]:
    """A YAML config file's contents (a mapping of sections): a regular file of at most
    ``max_bytes``, UTF-8, plain YAML (no tags that build objects), expanding to at most
    ``max_values`` values; ``ConfigError`` naming the file otherwise."""
    raw = read_checked_bytes(path, max_bytes=max_bytes, error=ConfigError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path} is not UTF-8 text (byte {error.start} is "
                          f"{raw[error.start:error.start + 1]!r}); save it as UTF-8") from None
    try:
        values = _BoundedLoader(text, str(path), max_values).get_single_data()
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is no plain YAML config ({str(error).splitlines()[0]}); "
                          "config files hold mappings, lists, strings and numbers only (tags "
                          "that build Python objects are refused)") from None
    except RecursionError:
        raise ConfigError(f"{path} nests too deep to be a config") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a mapping of config sections, got "
                          f"{type(values).__name__}")
    return values


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a document whose nodes, its aliases expanded, number more
    than ``max_values`` (counted on the composed nodes, before anything is built)."""

    def __init__(self, text: str, name: str, max_values: int) -> None:
        super().__init__(text)
        self.name, self.max_values = name, max_values

    def construct_document(self, node: yaml.Node) -> Any:
        expanded: dict[int, int] = {}
        if self._expanded_size(node, expanded, set()) > self.max_values:
            raise ConfigError(f"{self.name} expands to more than {self.max_values:,} values "
                              "through its YAML aliases (*name); refused, as aliases of aliases "
                              "can expand without bound. Write the values out")
        return super().construct_document(node)

    def _expanded_size(self, node: yaml.Node, expanded: dict[int, int], open_: set[int]) -> int:
        """How many nodes ``node`` stands for, each alias expanded (memoized by node)."""
        if id(node) in expanded:
            return expanded[id(node)]
        if id(node) in open_:
            raise ConfigError(f"{self.name} holds an alias inside its own anchor (a recursive "
                              "value); a config cannot hold one")
        open_.add(id(node))
        children = [] if isinstance(node, yaml.ScalarNode) else (
            [part for pair in node.value for part in pair]
            if isinstance(node, yaml.MappingNode) else node.value)
        size = 1
        for child in children:
            size += self._expanded_size(child, expanded, open_)
            if size > self.max_values:
                break
        open_.discard(id(node))
        expanded[id(node)] = size
        return size


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
