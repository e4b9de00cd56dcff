"""Checking the input files before any Ray work: that they exist, are of the read method's
kind and hold the schema's columns with the observation's shape, each problem named by file;
and the first rows of the first file, for the driver's first-rows check.

Input may be local paths and globs, URIs (``s3://bucket/prefix``, ``gs://...``) that Ray Data
resolves itself, or paths on a filesystem named by ``input_filesystem`` (``"s3"``, ``"gcs"``,
``"abs"`` or a ``pyarrow.fs.FileSystem``), given with or without their scheme.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from offline_rl.columns import Columns
from offline_rl.data.source.input_files import JSON_SUFFIXES, DataFiles, list_data_files
from offline_rl.data.source.input_listing import InputListing
from offline_rl.errors import DataFormatError, warn_at_caller
from offline_rl.formats.json_nesting import check_json_nesting
from offline_rl.formats.parquet_footer import FooterCaps, check_footer
from offline_rl.formats.shapes import conforms
from offline_rl.formats.tabular import missing_columns, resolve_schema

if TYPE_CHECKING:
    from offline_rl.data.source.data_config import DataConfig


def check_parquet_columns(listing: InputListing, schema_overrides: dict[str, str],
                          observation_space: gym.Space | None,
                          caps: FooterCaps | None = None) -> list[str] | None:
    """Fails fast, before any Ray work, on missing paths, folders without Parquet files, missing
    columns, observations of the wrong shape or type, and footers that declare what the file
    cannot hold or more than ``caps`` (``offline_rl.formats.parquet_footer``). Reads the first
    Parquet file's footer per path listed (every file's footer when local, so torn files are
    caught too), locally or through the listing's filesystem.

    Returns the columns to read when the files hold different ones (``shared_columns``;
    ``None`` when they agree): a column some files lack (``action_logp``, say) is left out,
    with a warning. Files that hold one column with different types are an error naming both
    files."""
    schema = resolve_schema(schema_overrides)
    footers: dict[str, pa.Schema] = {}
    for found in listing.found:
        first, fs = _first_file(found), found.filesystem
        footers[found.shown(first)] = _check_file(found.shown(first), fs, first, schema,
                                                  observation_space, caps)
        if isinstance(fs, pafs.LocalFileSystem):
            for file in found.files[1:]:
                footers[found.shown(file)] = _read_schema(found.shown(file), fs, file, caps)
                _check_columns(found.shown(file), footers[found.shown(file)], schema)
    return shared_columns(footers)


def shared_columns(footers: dict[str, pa.Schema]) -> list[str] | None:
    """The columns every file holds, when some files hold columns others lack (``None`` when
    all hold the same ones), with a warning naming the columns left out and a file without
    them; ``DataFormatError`` naming two files when a column's type differs.

    Examples:
        >>> a = pa.schema([("obs", pa.float32()), ("action_logp", pa.float32())])
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     shared_columns({"a.parquet": a, "b.parquet": pa.schema([("obs", pa.float32())])})
        ['obs']
        >>> str(caught[0].message).endswith("without ['action_logp'] (b.parquet lacks them)")
        True
        >>> shared_columns({"a.parquet": a, "c.parquet": pa.schema([("obs", pa.int64())])})
        Traceback (most recent call last):
        ...
        offline_rl.errors.DataFormatError: column 'obs' is float in a.parquet but int64 in ...
    """
    first: dict[str, tuple[str, pa.DataType]] = {}
    for file, footer in footers.items():
        for field in footer:
            seen_in, seen_type = first.setdefault(field.name, (file, field.type))
            if seen_type != field.type:
                raise DataFormatError(
                    f"column {field.name!r} is {seen_type} in {seen_in} but {field.type} in "
                    f"{file}; the input files must agree on each column's type. Re-write one "
                    "of them, or read them separately")
    shared = [name for name in first if all(name in footer.names for footer in footers.values())]
    if len(shared) == len(first):
        return None
    left_out = [name for name in first if name not in shared]
    lacking = next(file for file, footer in footers.items()
                   if not set(left_out) <= set(footer.names))
    warnings.warn(f"the input files hold different columns: reading only those all of them "
                  f"hold, without {left_out} ({lacking} lacks them)", stacklevel=2)
    return shared


def require_parquet_files(listing: InputListing, caps: FooterCaps | None = None) -> None:
    """Fails fast, before any Ray work, on a path holding no Parquet files (for formats whose
    columns are checked later: episodes, SampleBatches) and on footers ``check_footer``
    refuses (the first file's per path listed; every file's when local)."""
    for found in listing.found:
        first, fs = _first_file(found), found.filesystem
        _read_schema(found.shown(first), fs, first, caps)
        if isinstance(fs, pafs.LocalFileSystem):
            for file in found.files[1:]:
                _read_schema(found.shown(file), fs, file, caps)


def check_json_files(listing: InputListing) -> None:
    """Scans every JSON input file listed for nesting deeper than ``MAX_JSON_DEPTH`` before
    Arrow's JSON reader, which would crash on it, parses any: ``DataFormatError`` naming the
    file and line."""
    for shown, filesystem, file in listing.data_files():
        with filesystem.open_input_stream(file) as stream:
            check_json_nesting(stream, shown)


def _first_file(found: DataFiles) -> str:
    """The first Parquet file of an input path, which must hold one."""
    if found.files:
        return found.files[0]
    json_files = [os.path.basename(file) for file in
                  list_data_files(found.path, found.filesystem, JSON_SUFFIXES)[0].files]
    if json_files:
        shown = ", ".join(json_files[:3]) + (", ..." if len(json_files) > 3 else "")
        raise DataFormatError(
            f"no Parquet files (*.parquet) under {found.path!r}, but JSON files ({shown}): read "
            "them with config.offline_data(input_read_method='read_json')")
    raise DataFormatError(f"no Parquet files (*.parquet) under {found.path!r}; point input_ at "
                          "a folder of Parquet files or set input_read_method")


def first_rows(listing: InputListing, num_rows: int, *, columns: list[str] | None = None,
               row_filter: pads.Expression | None = None) -> tuple[str, pa.Table] | None:
    """The input's first file and up to ``num_rows`` of its first rows (of ``columns``, or all;
    those ``row_filter`` keeps), read with pyarrow in this process (``None`` for a URI left to
    Ray Data, and for no rows)."""
    found = listing.found[0] if listing.found else None
    if found is None or found.path != listing.paths[0] or not found.files:
        return None
    file = found.files[0]
    table = pads.dataset(file, filesystem=found.filesystem, format="parquet").head(
        num_rows, columns=columns, filter=row_filter)
    return (found.shown(file), table) if table.num_rows else None


def check_input(config: DataConfig, observation_space: gym.Space) -> list[str] | None:
    """Lists the input files in this process (``DataConfig.input_listing``: a file that is no
    regular file inside its folder, or is over the size cap, fails naming it; the files
    skipped are named in a warning), then checks, by the read method, their columns
    (``check_parquet_columns``; episodes: ``require_parquet_files``) or their JSON
    (``check_json_files``), so that the common errors name the file at once. Custom input
    readers are checked as they read (``offline_rl.data.source.custom_input``).

    Returns the columns every input file holds, when some hold more (``None``: all the
    same)."""
    options = config.offline_data
    if config.input_creator is not None:
        return None
    listing = config.input_listing
    _warn_skipped(listing.skipped)
    if options.input_read_method == "read_parquet" and not config.reads_episodes:
        return check_parquet_columns(listing, options.input_read_schema, observation_space)
    if options.input_read_method == "read_parquet":
        require_parquet_files(listing)
    elif options.input_read_method == "read_json":
        check_json_files(listing)
    return None


def _warn_skipped(skipped: list[str]) -> None:
    """A warning naming the input files skipped, each with why."""
    if skipped:
        shown = "; ".join(skipped[:5]) + (f"; and {len(skipped) - 5} more"
                                          if len(skipped) > 5 else "")
        warn_at_caller(f"skipped {len(skipped)} input file(s) that cannot be read: {shown}. "
                       "Fix or remove them (they are counted in result['data']['dropped']"
                       "['skipped_files'])")


def _read_schema(shown: str, fs: pafs.FileSystem, file: str,
                 caps: FooterCaps | None) -> pa.Schema:
    """The file's Arrow schema, read from its footer alone once ``check_footer`` accepts it."""
    try:
        with fs.open_input_file(file) as handle:
            parquet = pq.ParquetFile(handle)
            metadata, arrow_schema, size = parquet.metadata, parquet.schema_arrow, handle.size()
    except (OSError, pa.ArrowException) as error:
        raise DataFormatError(
            f"{shown} is not a readable Parquet file ({error}); it may be truncated or corrupt. "
            "Re-write it or move it out of the input folder") from None
    check_footer(metadata, shown, size, caps)
    repeated = sorted(name for name, count in Counter(arrow_schema.names).items() if count > 1)
    if repeated:
        raise DataFormatError(f"{shown}: column(s) {repeated} appear more than once, and Arrow "
                              "reads a column by its name; re-write the file with a name of its "
                              "own for each column")
    return arrow_schema


def _check_columns(shown: str, arrow_schema: pa.Schema, schema: dict[str, str]) -> None:
    missing = missing_columns(arrow_schema.names, schema)
    if missing:
        raise DataFormatError(
            f"{shown} has no column(s) {missing} (columns: {sorted(arrow_schema.names)}). Rename "
            "the columns or map them with config.offline_data(input_read_schema={field: column})."
        )


def _check_file(shown: str, fs: pafs.FileSystem, file: str, schema: dict[str, str],
                observation_space: gym.Space | None, caps: FooterCaps | None) -> pa.Schema:
    arrow_schema = _read_schema(shown, fs, file, caps)
    _check_columns(shown, arrow_schema, schema)
    if not isinstance(observation_space, gym.spaces.Box):
        return arrow_schema
    column = schema[Columns.OBS]
    arrow_type = arrow_schema.field(column).type
    leaf = _leaf_type(arrow_type)
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) or (
            pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)):
        return arrow_schema  # compressed: checked when decoded
    if not (pa.types.is_integer(leaf) or pa.types.is_floating(leaf) or pa.types.is_boolean(leaf)):
        raise DataFormatError(
            f"{shown}: column {column!r} holds {leaf} values, but the observation space "
            f"{observation_space} expects numbers; check the data or input_read_schema")
    shape = _row_shape(arrow_type)
    if shape is not None and not conforms(shape, observation_space.shape):
        raise DataFormatError(
            f"{shown}: column {column!r} holds arrays of shape {shape} but the observation space "
            f"is {observation_space} with shape {observation_space.shape}; check the data or "
            "config.environment(observation_space=...)"
        )
    return arrow_schema


def _leaf_type(arrow_type: Any) -> pa.DataType:
    """The element type under any list or tensor nesting."""
    while hasattr(arrow_type, "value_type") or hasattr(arrow_type, "storage_type"):
        arrow_type = getattr(arrow_type, "value_type", None) or arrow_type.storage_type
    return arrow_type


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
