"""The ``offline_data`` section: where the data is and how it is read, mapped and iterated,
and where recordings go (RLlib's Input/Output API names)."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from offline_rl.columns import LEGACY_DONE, SCHEMA
from offline_rl.errors import ConfigError
from offline_rl.filesystems import resolve_filesystem
from offline_rl.formats.checks import (
    ACTION_BOUNDS_POLICIES,
    NONFINITE_POLICIES,
    OBS_BOUNDS_POLICIES,
)
from offline_rl.settings.options import (
    A_BOOL,
    A_NUMBER_ABOVE_0,
    A_NUMBER_AT_LEAST_0,
    AN_INT_AT_LEAST_1,
    KEYWORD_ARGUMENTS,
    Rule,
    Section,
    is_int_at_least,
    one_of,
    option,
    optional,
)
from offline_rl.settings.sources import InputSpec, is_mixed, mix_problem

#: ``iter_batches`` keywords offline-rl sets itself.
RESERVED_ITER_KWARGS = ("batch_size", "batch_format", "drop_last")
#: Keywords ``ray.data.read_parquet``/``read_json`` pass on to pyarrow (their ``**kwargs``).
ARROW_READ_KWARGS = {
    "read_parquet": {"dataset_kwargs", "schema", "use_threads", "filter", "batch_size",
                     "batch_readahead", "fragment_readahead", "fragment_scan_options"},
    "read_json": {"read_options", "parse_options", "convert_options", "block_size"},
}
#: The write methods recordings support, and the format each writes.
WRITE_METHODS = {"write_parquet": "parquet", "write_json": "json"}


def input_problem(paths: Any) -> str | None:
    """What is wrong with ``input_`` (a path or URI, or a list of them; or a custom input: a
    callable ``(IOContext) -> InputReader`` or a name ``register_input`` registered), or
    ``None``."""
    if callable(paths):
        return None
    if is_mixed(paths):
        return mix_problem(paths)
    if not paths:
        return "set the path(s) of the data to train on"
    if isinstance(paths, str) or (isinstance(paths, list | tuple) and all(
            isinstance(path, str) and path for path in paths)):
        return None
    return (f"must be a path or URI (str) or a list of them, or a callable (IOContext) -> "
            f"InputReader, got {paths!r}")


def column_renames_problem(schema: Any) -> str | None:
    """What is wrong with ``input_read_schema`` (offline-rl's column names to the data's), or
    ``None``: a key that names no field (a typo, or the mapping given the data's way round)
    is named, with the fields there are.

    Examples:
        >>> problem = column_renames_problem({"state": "obs"})
        >>> "['state'], which name no field" in problem, "give {'obs': 'state'}" in problem
        (True, True)
    """
    if not (isinstance(schema, dict) and all(isinstance(key, str) and isinstance(name, str)
                                             for key, name in schema.items())):
        return ("must map offline-rl's column names to the data's (e.g. {'obs': "
                f"'observation'}}), got {schema!r}")
    fields = sorted({*SCHEMA, LEGACY_DONE})
    unknown = [key for key in schema if key not in fields]
    if not unknown:
        return None
    hints = []
    reversed_keys = {schema[key]: key for key in unknown if schema[key] in fields}
    if reversed_keys:
        hints.append(f"the mapping is reversed? give {reversed_keys}")
    for key in unknown:
        close = difflib.get_close_matches(key, fields, n=1)
        if close and schema[key] not in fields:
            hints.append(f"{key!r}: did you mean {close[0]!r}?")
    return (f"has the key(s) {unknown}, which name no field; the keys are offline-rl's fields "
            f"and the values the data's columns" + (f" ({'; '.join(hints)})" if hints else "")
            + f"; the fields are {fields}")


@dataclass
class OfflineDataConfig(Section):
    """The ``offline_data`` section: where the data is and how it is read, mapped, iterated
    and written (``AlgorithmConfig.offline_data`` sets it).

    Examples:
        >>> OfflineDataConfig(input_="data", input_nonfinite="skip").problems()
        [('input_nonfinite', "must be one of ('raise', 'drop'), got 'skip'")]
    """

    #: The data: a path or URI, or a list of them (folders, files, globs); or a custom input,
    #: a callable ``(IOContext) -> InputReader`` or a name ``register_input`` registered.
    input_: str | list[str] | Callable[..., Any] | None = option(None, input_problem)
    #: Arguments a custom input reader finds in ``IOContext.input_config``.
    input_config: dict[str, Any] = option({}, KEYWORD_ARGUMENTS)
    #: Rows (timesteps) each custom input reader is read for, at most.
    input_reader_max_rows: int = option(100_000, AN_INT_AT_LEAST_1)
    #: Seconds a custom input reader's creator or ``next()`` call may take before the read
    #: fails naming the reader (a hung reader would hang ``train()``).
    input_reader_timeout_s: float = option(300.0, A_NUMBER_ABOVE_0)
    #: The ``ray.data.read_*`` function (or a callable ``(paths, **kwargs) -> Dataset``).
    input_read_method: str | Callable[..., Any] = option("read_parquet", Rule(
        "a ray.data.read_* name or a callable",
        lambda value: isinstance(value, str) or callable(value)))
    #: Keywords of the read method.
    input_read_method_kwargs: dict[str, Any] = option({}, KEYWORD_ARGUMENTS)
    #: Column renames, the data's names to offline-rl's.
    input_read_schema: dict[str, str] = option({}, column_renames_problem)
    #: The data holds msgpack-encoded ``SingleAgentEpisode``s (RLlib's episodes format).
    input_read_episodes: bool = option(False, A_BOOL)
    #: The data holds old-stack ``SampleBatch`` JSON lines.
    input_read_sample_batches: bool = option(False, A_BOOL)
    #: Rows per batch each PreLearner maps (``None``: chosen from the train batch size).
    input_read_batch_size: int | None = option(None, optional(AN_INT_AT_LEAST_1))
    #: A pyarrow filesystem, or ``"s3"``/``"gcs"``/``"abs"`` with ``input_filesystem_kwargs``.
    input_filesystem: Any = option(None)
    input_filesystem_kwargs: dict[str, Any] = option({})
    #: Columns stored compressed (RLlib's ``compress_columns``).
    input_compress_columns: list[str] = option([], Rule(
        "a list of column names", lambda value: isinstance(value, list | tuple)))
    #: NaN/inf in observations, actions or rewards: ``"raise"`` or ``"drop"`` the row or
    #: episode (counted).
    input_nonfinite: str = option("raise", one_of(*NONFINITE_POLICIES))
    #: Observations outside a ``Box`` observation space: the same choice.
    input_obs_bounds: str = option("raise", one_of(*OBS_BOUNDS_POLICIES))
    #: ``Box`` actions outside the action space: ``"keep"`` (RLlib records the sampled,
    #: unclipped action), ``"clip"`` or ``"raise"``; counted either way.
    input_action_bounds: str = option("keep", one_of(*ACTION_BOUNDS_POLICIES))
    #: The recorded ``Box`` actions are normalized to [-1, 1] (RLlib's old stack wrote them so
    #: with ``normalize_actions``): they are mapped onto the action space's bounds first.
    input_actions_normalized: bool = option(False, A_BOOL)
    #: Tabular rows' next observations are taken as zeros, not read (RLlib's option, for BC,
    #: which does not use them; offline RL algorithms do).
    ignore_final_observation: bool = option(False, A_BOOL)
    #: Materialize the raw data in the object store before mapping.
    materialize_data: bool = option(False, A_BOOL)
    #: Materialize the mapped data, read and mapped once for all epochs.
    materialize_mapped_data: bool = option(True, A_BOOL)
    #: ``map_batches`` keywords: the PreLearner pool (``concurrency``), ``num_cpus``, ...
    map_batches_kwargs: dict[str, Any] = option({})
    #: ``iter_batches`` keywords (``prefetch_batches``, ...).
    iter_batches_kwargs: dict[str, Any] = option({}, Rule(
        f"a dict without {list(RESERVED_ITER_KWARGS)}: those are set by offline-rl (train "
        "batches hold exactly train_batch_size_per_learner rows)",
        lambda value: isinstance(value, dict) and not set(value) & set(RESERVED_ITER_KWARGS)))
    #: The PreLearner class (``OfflinePreLearner`` when ``None``).
    prelearner_class: type | str | None = option(None)
    #: The PreLearners' episode buffer class (``EpisodeReplayBuffer`` when ``None``).
    prelearner_buffer_class: type | str | None = option(None)
    prelearner_buffer_kwargs: dict[str, Any] = option({})
    #: Keywords of the PreLearner's constructor and its ``_map_to_episodes``.
    prelearner_kwargs: dict[str, Any] = option({}, KEYWORD_ARGUMENTS)
    #: Batches between two syncs of the module weights into the PreLearners.
    prelearner_module_synch_period: int = option(10, AN_INT_AT_LEAST_1)
    #: RLlib's start of sequences from recorded module states: offline-rl's modules are
    #: stateless, so only ``False``.
    prelearner_use_recorded_module_states: bool = option(False, Rule(
        "False: offline-rl's modules are stateless (no LSTM/attention yet), so there are no "
        "recorded module states to start sequences from", lambda value: value is False))
    #: RLlib's flag that env runners sample offline data: offline-rl's env runners never do
    #: (offline data is read by ``OfflineData``), so it changes nothing.
    offline_sampling: bool = option(False, A_BOOL)
    #: Replaces ``OfflineData``.
    offline_data_class: type | str | None = option(None)
    #: Updates per learner per ``train()`` (``None``: one full epoch of each shard).
    dataset_num_iters_per_learner: int | None = option(None, optional(AN_INT_AT_LEAST_1))
    #: Where recordings go (one path or URI), or a callable ``(IOContext) -> OutputWriter``.
    output: str | Callable[..., Any] | None = option(None, Rule(
        "one path or URI (a str; recordings go to one place) or a callable (IOContext) -> "
        "OutputWriter", lambda value: value is None or isinstance(value, str) or callable(value)))
    #: Arguments a custom output writer finds in ``IOContext.output_config``.
    output_config: dict[str, Any] = option({}, KEYWORD_ARGUMENTS)
    #: Columns written compressed.
    output_compress_columns: list[str] = option(["obs", "new_obs"])
    #: Bytes per written file, at most.
    output_max_file_size: int = option(64 * 1024 * 1024, Rule(
        "an int >= 1 (bytes)", lambda value: is_int_at_least(value, 1)))
    #: Rows per written file, at most (``None``: by size only).
    output_max_rows_per_file: int | None = option(None, optional(AN_INT_AT_LEAST_1))
    #: RLlib's flag to write the rows that do not fill ``output_max_rows_per_file`` when
    #: recording stops; offline-rl always writes them (a recording never drops data), so
    #: ``False`` writes them too.
    output_write_remaining_data: bool = option(False, A_BOOL)
    output_write_method: str = option("write_parquet", Rule(
        f"one of {sorted(WRITE_METHODS)}", lambda value: value in WRITE_METHODS))
    output_write_method_kwargs: dict[str, Any] = option({})
    output_filesystem: Any = option(None)
    output_filesystem_kwargs: dict[str, Any] = option({})
    #: Write whole episodes (msgpack, RLlib's format) rather than tabular rows.
    output_write_episodes: bool = option(True, A_BOOL)
    #: Write old-stack ``SampleBatch`` JSON lines, one per episode (RLlib's ``JsonWriter``
    #: format, what the old stack's ``output`` path wrote) rather than Parquet.
    output_write_sample_batches: bool = option(False, A_BOOL)

    @property
    def input_spec(self) -> InputSpec:
        """``input_`` parsed (``InputSpec``; no sources while unset): what every reader of
        ``input_`` reads. ``ConfigError`` naming the problem when ``input_`` is not valid."""
        if self.input_ is None:
            return InputSpec()
        problem = input_problem(self.input_)
        if problem:
            raise ConfigError(f"input_: {problem}")
        return InputSpec.of(self.input_)

    @property
    def reads_episodes(self) -> bool:
        """Whether the input holds whole episodes (msgpack episodes or SampleBatch JSON, or a
        callable custom input's SampleBatches)."""
        return self.input_read_episodes or self.input_read_sample_batches or callable(
            self.input_)

    def joint_problems(self) -> list[tuple[str, str]]:
        """The read method's keywords, the filesystems, the map_batches resources, and the
        choices that exclude each other."""
        problems = []
        if isinstance(self.input_read_method, str) and isinstance(
                self.input_read_method_kwargs, dict):
            problems += read_kwargs_problems(self.input_read_method,
                                             self.input_read_method_kwargs)
        for direction in ("input", "output"):
            field = f"{direction}_filesystem"
            try:
                resolve_filesystem(getattr(self, field), getattr(self, f"{field}_kwargs"),
                                   field=field)
            except ConfigError as error:
                problems.append((field, error.message))
        if self.input_read_episodes and self.input_read_sample_batches:
            problems.append(("input_read_episodes", "input_read_episodes and "
                             "input_read_sample_batches are both set; choose the one format "
                             "the data is in"))
        problems += map_batches_problems(self.map_batches_kwargs)
        if self.output_write_episodes and self.output_write_method != "write_parquet":
            problems.append(("output_write_method", "episodes (output_write_episodes=True) "
                             "are written as Parquet; use write_parquet or set "
                             "output_write_episodes=False"))
        if self.output_write_sample_batches and (
                self.output_write_episodes or self.output_write_method != "write_parquet"):
            problems.append(("output_write_sample_batches", "SampleBatch JSON lines are a format "
                             "of their own: set output_write_episodes=False and leave "
                             "output_write_method unset"))
        return problems


def read_kwargs_problems(method: str, kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    """``input_read_method_kwargs`` that ``ray.data.<method>`` does not take."""
    import ray.data

    function = getattr(ray.data, method, None) if method.startswith("read_") else None
    if not callable(function):
        return []  # resolve_read_method names the problem when the data is read
    parameters = inspect.signature(function).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if takes_any and method not in ARROW_READ_KWARGS:
        return []
    known = {name for name, p in parameters.items()
             if p.kind is not inspect.Parameter.VAR_KEYWORD} - {"paths"}
    known |= ARROW_READ_KWARGS.get(method, set())
    unknown = sorted(set(kwargs) - known)
    if not unknown:
        return []
    return [("input_read_method_kwargs", f"ray.data.{method} takes no {unknown}; it takes "
             f"{sorted(known)}")]


def map_batches_problems(kwargs: Any) -> list[tuple[str, str]]:
    """``map_batches_kwargs``: a dict; ``concurrency`` an int >= 1 or a ``(min, max)`` range of
    them; ``num_cpus``/``num_gpus`` numbers >= 0; no ``batch_size``."""
    if not isinstance(kwargs, dict):
        return [("map_batches_kwargs", f"must be a dict of keyword arguments, got {kwargs!r}")]
    problems = []
    concurrency = kwargs.get("concurrency", 1)
    pool = (list(concurrency) if isinstance(concurrency, list | tuple)
            else [concurrency, concurrency])
    if not (len(pool) == 2 and all(AN_INT_AT_LEAST_1.holds(size) for size in pool)
            and pool[0] <= pool[1]):
        problems.append(("map_batches_kwargs", "concurrency must be an int >= 1 (PreLearner "
                         "actors) or a [min, max] range of them, got " f"{concurrency!r}"))
    for resource in ("num_cpus", "num_gpus"):
        if resource in kwargs and not A_NUMBER_AT_LEAST_0.holds(kwargs[resource]):
            problems.append(("map_batches_kwargs", f"{resource} must be a number >= 0, got "
                             f"{kwargs[resource]!r}"))
    if "batch_size" in kwargs:
        problems.append(("map_batches_kwargs", "batch_size is chosen by offline-rl (set "
                         "input_read_batch_size instead)"))
    return problems
