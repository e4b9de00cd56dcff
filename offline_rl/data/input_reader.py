"""Finding, checking and reading the input files into a Ray Dataset."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import pyarrow.parquet as pq
import ray.data

from offline_rl.columns import Columns
from offline_rl.data.tabular import DataFormatError, missing_columns, resolve_schema

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig

#: Set to "1" to read Parquet with Ray Data's newer datasource (slower to start on small data).
DATASOURCE_V2_ENV = "RAY_DATA_USE_DATASOURCE_V2"


def input_paths(input_: str | list[str]) -> list[str]:
    """``input_`` as a list of paths."""
    return [input_] if isinstance(input_, str | os.PathLike) else [str(p) for p in input_]


def resolve_read_method(method: str | Callable[..., ray.data.Dataset]
                        ) -> Callable[..., ray.data.Dataset]:
    """``"read_parquet"`` (or any ``ray.data.read_*`` name) or a callable -> the callable."""
    if callable(method):
        return method
    if not method.startswith("read_") or not hasattr(ray.data, method):
        raise ValueError(f"input_read_method={method!r} is not a ray.data.read_* function "
                         "(e.g. 'read_parquet', 'read_json') or a callable")
    return getattr(ray.data, method)


def check_local_parquet(paths: list[str], schema_overrides: dict[str, str],
                        observation_space: gym.Space | None) -> None:
    """Fails fast, before any Ray work, on missing paths, folders without Parquet files, missing
    columns and observation shapes that do not match the space (reads Parquet footers only)."""
    schema = resolve_schema(schema_overrides)
    for path in paths:
        if "://" in path:
            continue
        root = Path(path)
        if not root.exists():
            raise FileNotFoundError(f"input_={path!r} does not exist; record a dataset first "
                                    "(offline-rl datasets make ...) or fix the path")
        files = [root] if root.is_file() else sorted(root.rglob("*.parquet"))
        if not files:
            raise DataFormatError(f"no Parquet files (*.parquet) under {path!r}; point input_ "
                                  "at a folder of Parquet files or set input_read_method")
        _check_file(files[0], schema, observation_space)


def _check_file(file: Path, schema: dict[str, str], observation_space: gym.Space | None) -> None:
    arrow_schema = pq.read_schema(file)
    missing = missing_columns(arrow_schema.names, schema)
    if missing:
        raise DataFormatError(
            f"{file} has no column(s) {missing} (columns: {sorted(arrow_schema.names)}). Rename "
            "the columns or map them with config.offline_data(input_read_schema={field: column})."
        )
    if not isinstance(observation_space, gym.spaces.Box):
        return
    column = schema[Columns.OBS]
    shape = _row_shape(arrow_schema.field(column).type)
    if shape is not None and shape != observation_space.shape:
        raise DataFormatError(
            f"{file}: column {column!r} holds arrays of shape {shape} but the observation space "
            f"is {observation_space} with shape {observation_space.shape}; check the data or "
            "config.environment(observation_space=...)"
        )


def _row_shape(arrow_type: Any) -> tuple[int, ...] | None:
    """The per-row shape a column type fixes (tensor extension or fixed-size list), else None."""
    if hasattr(arrow_type, "shape"):
        return tuple(arrow_type.shape)
    if hasattr(arrow_type, "list_size"):
        inner = _row_shape(arrow_type.value_type)
        return None if inner is None else (arrow_type.list_size, *inner)
    if hasattr(arrow_type, "value_type"):
        return None
    return ()


@contextmanager
def _quiet_read_context() -> Iterator[None]:
    """Datasets created inside copy this context: no progress bars or execution banners (the
    CLI shows its own), and the quicker-starting V1 Parquet reader unless the user opted in."""
    context = ray.data.DataContext.get_current()
    settings = {"enable_progress_bars": False, "print_on_execution_start": False}
    if DATASOURCE_V2_ENV not in os.environ:
        settings["use_datasource_v2"] = False
    saved = {name: getattr(context, name) for name in settings}
    for name, value in settings.items():
        setattr(context, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(context, name, value)


def read_input(config: AlgorithmConfig) -> ray.data.Dataset:
    """``input_read_method(paths, **input_read_method_kwargs)`` as a Dataset."""
    read = resolve_read_method(config.input_read_method)
    with _quiet_read_context():
        dataset = read(input_paths(config.input_), **config.input_read_method_kwargs)
    if config.materialize_data:
        dataset = dataset.materialize()
    return dataset
