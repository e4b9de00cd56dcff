"""RLlib's flat config dicts (``rllib train --config JSON``, ``update_from_dict``, the old stack's
``config={...}``) in ``to_dict``'s layout of sections.

A flat key is an option's own name (``lr``, ``input_``), placed in its section, or one of the
old stack's keys (``OLD_STACK_KEYS``), translated into the options that do the same here, with
one warning naming them. Each old key's value passes a check first (``OldKey``: the check of
the option it becomes, or one of its own), so that ``actions_in_input_normalized='false'`` is
refused rather than read as true. Old keys with no equivalent are refused with the reason;
unknown keys fail as before. A custom ``input`` (a creator, or a name ``register_input``
registered) and ``output`` (a creator) are kept, and their ``input_config``/``output_config``
too.

Examples:
    >>> import warnings
    >>> from offline_rl import BCConfig
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     sections = sectioned({"input": "/tmp/cartpole-out", "lr": 0.01}, BCConfig())
    >>> sections["offline_data"]["input_"], sections["training"]["lr"]
    ('/tmp/cartpole-out', 0.01)
    >>> str(caught[0].message)[:62]
    "old-stack key 'input' is offline_data(input_='/tmp/cartpole-ou"
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline_rl.data.source.input_api import (
    input_creator,
    looks_like_input_name,
    unregistered_input_error,
)
from offline_rl.errors import ConfigError, warn_at_caller
from offline_rl.settings.options import (
    A_BOOL,
    A_NUMBER_AT_LEAST_0,
    AN_INT_AT_LEAST_0,
    AN_INT_AT_LEAST_1,
    KEYWORD_ARGUMENTS,
    Check,
    Rule,
    finite_number,
    is_int_at_least,
    one_of,
)
from offline_rl.settings.sections import LAYOUT
from offline_rl.settings.sources import SAMPLER

#: The estimators the old stack's ``input_evaluation`` names.
OLD_ESTIMATOR_NAMES = {"is": "ImportanceSampling", "wis": "WeightedImportanceSampling"}
#: The old stack's output: SampleBatch JSON lines, as its ``JsonWriter`` wrote.
SAMPLE_BATCH_OUTPUT = {"output_write_episodes": False, "output_write_sample_batches": True}
#: The formats the old stack's ``input_config``/``output_config`` read and wrote.
OLD_FORMATS = one_of("json", "parquet")


@dataclass(frozen=True)
class OldKey:
    """An old-stack key: the check its value passes before it is translated, and the
    translation ``(value, given) -> options``.

    ``check`` is the name of the option the value becomes (its check is used: a bool is a
    bool, a count a count), a check of its own (a key that becomes no option, or another
    value), or, for a dict of known keys, one such check per key (a key not listed is refused).
    ``option_first``: where the algorithm has an option of the same name, that option is set
    instead (DQN's ``exploration_config``)."""

    check: str | Check | dict[str, str | Check]
    translate: Callable[[Any, Given], dict[str, Any]]
    option_first: bool = False


@dataclass(frozen=True)
class Given:
    """What a translation may read besides its key's value: the flat keys given with it and
    the config they are set on."""

    values: dict[str, Any]
    config: Any


def _json_input(path: Any) -> dict[str, Any]:
    """The old stack's ``input`` path: SampleBatch JSON files, as its ``JsonReader`` read;
    ``ConfigError`` for a local path of Parquet files only (the new stack's ``input_``)."""
    if isinstance(path, str) and _holds_parquet_only(Path(path)):
        raise ConfigError(f"input={path!r}: the old stack's input reads SampleBatch JSON lines, "
                          f"but {path} holds Parquet files: give it as input_ (the new stack's "
                          f"key), e.g. config.offline_data(input_={path!r})")
    return {"input_": path, "input_read_method": "read_json", "input_read_sample_batches": True}


def _holds_parquet_only(path: Path) -> bool:
    """Whether ``path`` is a local Parquet file, or a folder of Parquet and no JSON files."""
    if path.is_file():
        return path.suffix == ".parquet"
    if not path.is_dir():
        return False
    suffixes = {file.suffix for file in path.rglob("*") if file.is_file()}
    return ".parquet" in suffixes and not suffixes & {".json", ".jsonl", ".gz"}


def _input(value: Any, _: Given) -> dict[str, Any]:
    if value == SAMPLER:
        raise ConfigError("input='sampler' alone is online RL: offline-rl trains from recorded "
                          "data, with at most a share of online experience: give "
                          "{path: weight, 'sampler': weight}, or record data first "
                          "(`offline-rl record`, `offline-rl datasets make`) and give its path")
    if value == "dataset":  # the path is input_config's
        return {}
    if input_creator(value) is not None:  # a registered name is resolved in the driver
        return {"input_": value}
    if looks_like_input_name(value) and not os.path.exists(value):
        raise unregistered_input_error(value)
    if isinstance(value, dict):  # each path is SampleBatch JSON, as the old stack read it
        return {"input_": [{"input_": path, "weight": weight} if path == SAMPLER else
                           {**_json_input(path), "weight": weight}
                           for path, weight in value.items()]}
    return _json_input(value)


def _input_config(value: dict[str, Any], _: Given) -> dict[str, Any]:
    options = (_json_input(value["path"]) if value.get("format", "json") == "json"
               else {"input_": value["path"], "input_read_method": "read_parquet"}
               ) if "path" in value else {}
    kwargs = {}
    if "parallelism" in value:
        kwargs["override_num_blocks"] = value["parallelism"]
    if "num_cpus_per_read_task" in value:
        kwargs["ray_remote_args"] = {"num_cpus": value["num_cpus_per_read_task"]}
    return {**options, **({"input_read_method_kwargs": kwargs} if kwargs else {})}


def _output(value: Any, _: Given) -> dict[str, Any]:
    if value == "logdir":
        raise ConfigError("output='logdir' writes into the run's folder, which only the command "
                          "line knows (`offline-rl train --run ...`); in Python give a path")
    if callable(value) or value is None:
        return {"output": value}
    return {} if value == "dataset" else {"output": value, **SAMPLE_BATCH_OUTPUT}


def _output_config(value: dict[str, Any], _: Given) -> dict[str, Any]:
    options: dict[str, Any] = {"output": value["path"]} if "path" in value else {}
    if value.get("format") == "json":  # the old stack's dataset writer wrote SampleBatches
        options.update(SAMPLE_BATCH_OUTPUT)
    elif "format" in value:
        options.update(output_write_method=f"write_{value['format']}",
                       output_write_episodes=False)
    if "max_num_samples_per_file" in value:
        options["output_max_rows_per_file"] = value["max_num_samples_per_file"]
    return options  # store_infos: infos are always written (as RLlib's torch policies do)


def _input_evaluation(value: Any, _: Given) -> dict[str, Any]:
    names = [value] if isinstance(value, str) else list(value)
    methods = {name: {"type": OLD_ESTIMATOR_NAMES.get(name, name)}
               for name in names if name != "simulation"}
    options: dict[str, Any] = {"off_policy_estimation_methods": methods} if methods else {}
    return {**options, "evaluation_interval": 1} if names else {}


def _postprocess_inputs(value: bool, _: Given) -> dict[str, Any]:
    if value:
        raise ConfigError("postprocess_inputs=True is not supported: the learner connector "
                          "pipeline computes what postprocessing did (advantages for MARWIL, "
                          "n-step returns with n_step), from the recorded episodes")
    return {}


def _framework(value: str, _: Given) -> dict[str, Any]:
    if value != "torch":
        raise ConfigError(f"framework={value!r}: offline-rl's learners are torch only; drop "
                          "the key or set framework='torch'")
    return {}


def _shuffle_buffer_size(value: int, given: Given) -> dict[str, Any]:
    """Train batches, as the old stack counted; here rows of the train batch size given."""
    batch = given.values.get("train_batch_size", given.values.get(
        "train_batch_size_per_learner",
        given.config.sections.training.train_batch_size_per_learner))
    if not value or not is_int_at_least(batch, 1):  # a bad batch size is its own key's error
        return {}
    return {"iter_batches_kwargs": {"local_shuffle_buffer_size": value * batch}}


def _no_effect(key: str) -> Callable[[Any, Given], dict[str, Any]]:
    def translate(value: Any, _: Given) -> dict[str, Any]:
        warn_at_caller(f"{key}={value!r} has no effect: training from data acts in no env, "
                       "and evaluation acts greedily")
        return {}

    return translate


#: With a custom input (output), ``input_config`` (``output_config``) holds the reader's (the
#: writer's) own arguments, kept as they are.
CUSTOM_IO_CONFIGS = {"input_config": "input", "output_config": "output"}
A_FRACTION = finite_number("from 0 to 1", lambda value: 0 <= value <= 1)
#: The old stack's keys: the check of each one's value, and the options that do the same here.
OLD_STACK_KEYS: dict[str, OldKey] = {
    "input": OldKey("input_", _input),
    "input_config": OldKey({"format": OLD_FORMATS, "path": "input_",
                            "parallelism": AN_INT_AT_LEAST_1,
                            "num_cpus_per_read_task": A_NUMBER_AT_LEAST_0}, _input_config),
    "output": OldKey("output", _output),
    "output_config": OldKey({"format": OLD_FORMATS, "path": "output",
                             "max_num_samples_per_file": "output_max_rows_per_file",
                             "store_infos": A_BOOL}, _output_config),
    "input_evaluation": OldKey(Rule("an estimator name or a list of them ('is', 'wis', "
                                    "'simulation', or an OffPolicyEstimator's)",
                                    lambda value: isinstance(value, str) or (
                                        isinstance(value, list | tuple)
                                        and all(isinstance(name, str) for name in value))),
                               _input_evaluation),
    "actions_in_input_normalized": OldKey(
        "input_actions_normalized", lambda flag, _: {"input_actions_normalized": flag}),
    "num_workers": OldKey(AN_INT_AT_LEAST_0,  # 0: the old stack's local worker, none here
                          lambda n, _: {"num_env_runners": n} if n else {}),
    "evaluation_num_workers": OldKey("evaluation_num_env_runners",
                                     lambda n, _: {"evaluation_num_env_runners": n}),
    "model_config_dict": OldKey("model_config", lambda spec, _: {"model_config": spec}),
    "train_batch_size": OldKey("train_batch_size_per_learner",
                               lambda n, _: {"train_batch_size_per_learner": n}),
    "shuffle_buffer_size": OldKey(Rule("an int >= 0 (train batches shuffled across)",
                                       lambda value: is_int_at_least(value, 0)),
                                  _shuffle_buffer_size),
    "postprocess_inputs": OldKey(A_BOOL, _postprocess_inputs),
    "framework": OldKey(one_of("torch", "tf", "tf2", "jax"), _framework),
    # Acting in the env does not happen while training from data, and evaluation acts
    # greedily: these change nothing unless the algorithm takes them.
    "explore": OldKey(A_BOOL, _no_effect("explore"), option_first=True),
    "exploration_config": OldKey(KEYWORD_ARGUMENTS, _no_effect("exploration_config"),
                                 option_first=True),
    "exploration_fraction": OldKey(A_FRACTION, _no_effect("exploration_fraction"),
                                   option_first=True),
    "exploration_final_eps": OldKey(A_FRACTION, _no_effect("exploration_final_eps"),
                                    option_first=True),
}


def unknown_keys(keys: Any, config: Any) -> list[str]:
    """The keys of ``keys`` that are neither an option of ``config`` nor an old-stack key
    (``sectioned`` would refuse them)."""
    known = {name for section in LAYOUT for name in config.section_options(section)}
    return sorted(key for key in keys if key not in known and key not in OLD_STACK_KEYS)


def sectioned(values: dict[str, Any], config: Any) -> dict[str, dict[str, Any]]:
    """``values`` (flat keys of ``config``'s options or old-stack keys) in ``to_dict``'s
    layout; ``ConfigError`` for unknown keys, for an old key's value that fails its check
    (``OldKey``), and for old keys offline-rl refuses."""
    owners = {name: section for section in LAYOUT for name in config.section_options(section)}
    flat: dict[str, Any] = {}
    for key, value in values.items():
        old = OLD_STACK_KEYS.get(key)
        if key in CUSTOM_IO_CONFIGS and _custom_io(values, CUSTOM_IO_CONFIGS[key]):
            _merge(flat, key, {key: value})  # the custom reader's or writer's own arguments
        elif old is not None and not (old.option_first and key in owners):
            _check_old(key, value, old.check, config, owners)  # before it is translated
            _merge(flat, key, _translated(key, old.translate(value, Given(values, config)),
                                          owners))
        elif key in owners:
            _merge(flat, key, {key: value})
        elif isinstance(value, dict):
            raise ConfigError(f"unknown config section {key!r}; sections are "
                              f"{['algorithm', *LAYOUT]}")
        else:
            raise ConfigError(f"unknown config key {key!r}: not a section {list(LAYOUT)}, an "
                              f"option of {type(config).__name__}, or a known RLlib old-stack "
                              f"key ({sorted(OLD_STACK_KEYS)})")
    if "evaluation_config" in flat:
        flat["evaluation_config"] = evaluation_overrides(flat["evaluation_config"], config)
    if flat.get("off_policy_estimation_methods") and "input_" in flat and not flat.get(
            "evaluation_config", {}).get("input_"):
        held_out = {name: flat[name] for name in ("input_", "input_read_method",
                                                  "input_read_sample_batches") if name in flat}
        warn_at_caller("off_policy_estimation_methods estimate on the training input, as "
                       "RLlib's old stack did; give held-out data with "
                       "evaluation_config={'input_': ...}")
        flat["evaluation_config"] = {**flat.get("evaluation_config", {}), **held_out}
    result: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        result.setdefault(owners[key], {})[key] = value
    return result


def _check_old(name: str, value: Any, check: str | Check | dict[str, str | Check], config: Any,
               owners: dict[str, str]) -> None:
    """Raises ``ConfigError`` when old-stack key ``name``'s ``value`` fails ``check`` (see
    ``OldKey``), naming the key, the option it becomes and what the value must be."""
    if isinstance(check, dict):
        if not isinstance(value, dict) or set(value) - set(check):
            raise ConfigError(f"old-stack key {name} takes a dict of {list(check)}, got "
                              f"{value!r}")
        for key, item in value.items():
            _check_old(f"{name}[{key!r}]", item, check[key], config, owners)
        return
    becomes = ""
    if isinstance(check, str):
        becomes = f" ({owners[check]}({check}=...) here)"
        check = next(part.option_check(check) for part in config.sections.parts(owners[check])
                     if check in part.option_names())
    problem = check(value)
    if problem:
        joined = " " if problem.startswith("must ") else ": "
        raise ConfigError(f"old-stack key {name}{becomes}{joined}{problem}")


def _custom_io(values: dict[str, Any], key: str) -> bool:
    """Whether ``values[key]`` (``input``, ``output``, or the option of the same meaning) is
    a custom reader's creator (or registered name) or a writer's creator."""
    value = values.get(key, values.get(f"{key}_" if key == "input" else key))
    return input_creator(value) is not None if key == "input" else callable(value)


def _merge(flat: dict[str, Any], key: str, options: dict[str, Any]) -> None:
    """Adds ``options`` (what ``key`` set) to ``flat``; an option two keys set is an error,
    unless each sets other keys of a dict (``iter_batches_kwargs`` and
    ``shuffle_buffer_size``)."""
    twice = sorted(name for name in set(flat) & set(options) if not (
        isinstance(flat[name], dict) and isinstance(options[name], dict)
        and not set(flat[name]) & set(options[name])))
    if twice:
        raise ConfigError(f"{key!r} sets {twice}, which another key of the config sets too; "
                          "set each once")
    for name, value in options.items():
        flat[name] = {**flat[name], **value} if name in flat else value


def _translated(key: str, options: dict[str, Any], owners: dict[str, str]) -> dict[str, Any]:
    """``options`` (what old-stack ``key`` became), after one warning naming them as the
    builder calls that set them (none when ``key`` is an option of the same meaning)."""
    if options and list(options) != [key]:
        calls: dict[str, list[str]] = {}
        for name, option in options.items():
            calls.setdefault(owners[name], []).append(f"{name}={option!r}")
        shown = " and ".join(f"{section}({', '.join(parts)})" for section, parts in calls.items())
        warn_at_caller(f"old-stack key {key!r} is {shown}")
    return options


def evaluation_overrides(overrides: Any, config: Any) -> Any:
    """``evaluation_config`` with old-stack keys (``input``, ``explore``, ...) translated; only
    ``offline_data`` options stay (the section check names any other)."""
    if not isinstance(overrides, dict):
        return overrides
    try:
        translated = sectioned(overrides, config)
    except ConfigError as error:
        raise ConfigError(f"evaluation_config: {error.message}") from None
    return {**translated.pop("offline_data", {}),
            **{key: value for section in translated.values() for key, value in section.items()}}

