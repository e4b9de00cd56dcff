"""Reading the input files (or a custom input) into a Ray Dataset, quietly and with bounded retries.

Input may be local paths and globs, URIs (``s3://bucket/prefix``, ``gs://...``) that Ray Data
resolves itself, or paths on a filesystem named by ``input_filesystem`` (``"s3"``, ``"gcs"``,
``"abs"`` or a ``pyarrow.fs.FileSystem``), given with or without their scheme.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import ray.data

from offline_rl.data.ray.stoppable_executions import materialize
from offline_rl.data.source.custom_input import read_custom_input
from offline_rl.data.source.input_locator import gone_file
from offline_rl.errors import ConfigError, DataNotFoundError
from offline_rl.filesystems import absolute_path, filesystem_path, resolve_filesystem
from offline_rl.placement import current_placement_group

if TYPE_CHECKING:
    from offline_rl.data.source.data_config import DataConfig

#: Set to "1" to read Parquet with Ray Data's newer datasource (slower to start on small data).
DATASOURCE_V2_ENV = "RAY_DATA_USE_DATASOURCE_V2"
#: Ray Data's newer Parquet datasource (read in Tune trials) lists the files' footers on a pool
#: of actors that it starts for each read: 32 by default, however few the files, each reading
#: 128 footers at a time. In a trial, one (or as many as this variable asks for): a read of one
#: file in a placement group of 2 CPUs took 6.7 s instead of 8.6.
FOOTER_READERS_ENV = "RAY_DATA_PARQUET_FOOTER_NUM_ACTORS"
FOOTER_READERS = 1
#: Times a read task that failed (its process crashed, or its node was lost) is tried again.
READ_MAX_RETRIES = 3


def resolve_read_method(method: str | Callable[..., ray.data.Dataset]
                        ) -> Callable[..., ray.data.Dataset]:
    """``"read_parquet"`` (or any ``ray.data.read_*`` name) or a callable -> the callable."""
    if callable(method):
        return method
    named = isinstance(method, str) and method.startswith("read_")
    function = getattr(ray.data, method, None) if named else None
    if not callable(function):
        count = sum(name.startswith("read_") and callable(getattr(ray.data, name))
                    for name in dir(ray.data))
        raise ConfigError(f"input_read_method={method!r} is not one of the {count} ray.data.read_* "
                         "functions (e.g. 'read_parquet', 'read_json', 'read_csv') nor a callable "
                         "(paths, **kwargs) -> ray.data.Dataset")
    return function


@contextmanager
def quiet_data_context(*, preserve_order: bool = False,
                       object_store_memory: int | None = None) -> Iterator[None]:
    """Datasets created inside copy this context: no progress bars or execution banners (the
    CLI shows its own), errors raised in map functions kept as they are (not wrapped in Ray
    Data's ``UserCodeException``, which would lose our error type), and the quicker-starting V1
    Parquet reader unless the user opted in, or the read runs in a Tune trial's placement group
    (where Ray 2.60 schedules V1's read task only after ~40 s; there, with ``FOOTER_READERS``
    footer readers unless ``FOOTER_READERS_ENV`` is set). With ``preserve_order``, blocks
    leave every operator in order, so that a seeded run reads its rows in the same order every
    time (and a resumed one can skip exactly the rows it had trained on). With
    ``object_store_memory``, an execution holds at most that many bytes in the object store."""
    context = ray.data.DataContext.get_current()
    options = copy.copy(context.execution_options)
    options.preserve_order = options.preserve_order or preserve_order
    if object_store_memory is not None:
        options.resource_limits = options.resource_limits.copy(
            object_store_memory=object_store_memory)
    settings = {"enable_progress_bars": False, "print_on_execution_start": False,
                "raise_original_map_exception": True, "execution_options": options}
    in_trial = current_placement_group() is not None
    if DATASOURCE_V2_ENV not in os.environ and not in_trial:
        settings["use_datasource_v2"] = False
    footer_readers = in_trial and FOOTER_READERS_ENV not in os.environ
    saved = {name: getattr(context, name) for name in settings}
    for name, value in settings.items():
        setattr(context, name, value)
    if footer_readers:  # read by the datasource when it is created
        os.environ[FOOTER_READERS_ENV] = str(FOOTER_READERS)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(context, name, value)
        if footer_readers:
            os.environ.pop(FOOTER_READERS_ENV, None)


def read_input(config: DataConfig) -> ray.data.Dataset:
    """``input_read_method(paths, filesystem=..., **input_read_method_kwargs)`` as a Dataset
    (``filesystem`` only when ``input_filesystem`` is set; paths then lose their scheme), or a
    custom input's readers (``read_custom_input``). A ``ray.data.read_*`` method's read tasks
    (and a custom input's) are retried at most ``READ_MAX_RETRIES`` times (Ray Data's default
    is without end, so a reader that crashes on a file never stops), unless
    ``input_read_method_kwargs`` give ``ray_remote_args`` with ``max_retries``.

    The files of ``config.input_listing`` (what ``check_input`` listed and checked) are read
    instead of the paths, so that Ray Data reads exactly those: one deleted or moved since is a
    ``DataNotFoundError`` naming it, not an epoch silently the smaller."""
    options = config.offline_data
    creator = config.input_creator
    read = (_file_read(config) if creator is None else
            lambda: read_custom_input(config, creator, max_retries=READ_MAX_RETRIES))
    seeded = config.debugging.seed is not None
    with quiet_data_context(preserve_order=seeded), warnings.catch_warnings():
        # ray_remote_args is deprecated (Ray 2.64), but it is the only way to bound the retries
        warnings.filterwarnings("ignore", message=".*ray_remote_args", category=DeprecationWarning)
        try:
            dataset = read()
        except FileNotFoundError as error:
            gone, failure = gone_file(error)
            detail = "" if str(failure) == gone else f" ({failure})"
            raise DataNotFoundError(
                f"{gone} is gone: it was deleted or moved after build() listed and checked the "
                f"input{detail}, and before this pass over the data began (none of it was "
                "read). Put the file back, or build() again (resuming from the last checkpoint) "
                "to read the files there are now") from None
    if options.materialize_data:
        dataset = materialize(dataset)
    return dataset


def read_config(config: DataConfig, input_columns: list[str] | None) -> DataConfig:
    """``config`` as the pipeline reads with it: episode formats also read each row's file path
    (so that errors name the file); files holding different columns are read for the
    ``input_columns`` they share (``CheckedInput.columns``)."""
    options = config.offline_data
    kwargs = dict(options.input_read_method_kwargs)
    if (config.reads_episodes and isinstance(options.input_read_method, str)
            and "include_paths" not in kwargs):
        kwargs["include_paths"] = True
    if input_columns is not None and "columns" not in kwargs:
        kwargs["columns"] = input_columns
    return config.with_data_options(input_read_method_kwargs=kwargs)


def _file_read(config: DataConfig) -> Callable[[], ray.data.Dataset]:
    """The read of the input files (``InputListing.read_files``), as ``read_input`` runs
    it."""
    options = config.offline_data
    read = resolve_read_method(options.input_read_method)
    filesystem = resolve_filesystem(options.input_filesystem, options.input_filesystem_kwargs)
    kwargs = dict(options.input_read_method_kwargs)
    if filesystem is not None:
        if "filesystem" in kwargs:
            raise ConfigError("the filesystem is set twice: give it as input_filesystem or in "
                             "input_read_method_kwargs, not both")
        kwargs["filesystem"] = filesystem
    if isinstance(options.input_read_method, str):  # Ray Data retries a crashed read forever
        kwargs["ray_remote_args"] = {"max_retries": READ_MAX_RETRIES,
                                     **kwargs.get("ray_remote_args", {})}
    # the read tasks' working folders are their own: local paths go absolute
    paths = [absolute_path(path) if filesystem is None else filesystem_path(path, filesystem)
             for path in config.input_listing.read_files()]
    return lambda: read(paths, **kwargs)
