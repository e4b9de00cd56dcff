"""Filesystems of input and output paths: names (``"s3"``, ``"gcs"``, ``"abs"``) or pyarrow
``FileSystem`` instances, and paths with or without a scheme.

Examples:
    >>> resolve_filesystem(None) is None
    True
    >>> filesystem_path("s3://bucket/key", resolve_filesystem("s3", {"region": "us-east-1"}))
    'bucket/key'
    >>> resolve_filesystem("hdfs", field="output_filesystem")
    Traceback (most recent call last):
    ...
    offline_rl.errors.ConfigError: output_filesystem='hdfs' is not supported; use one of ...
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import pyarrow.fs as pafs

from offline_rl.errors import ConfigError

#: Filesystem names and the ``pyarrow.fs`` class each builds.
FILESYSTEMS = {"s3": "S3FileSystem", "gcs": "GcsFileSystem", "abs": "AzureFileSystem"}

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def resolve_filesystem(filesystem: str | pafs.FileSystem | None,
                       kwargs: Mapping[str, Any] | None = None, *,
                       field: str = "input_filesystem") -> pafs.FileSystem | None:
    """``filesystem`` (+ its ``kwargs``) as a pyarrow filesystem; ``field`` names the config
    field in messages (``"input_filesystem"`` or ``"output_filesystem"``).

    ``"s3"``, ``"gcs"`` and ``"abs"`` build ``S3FileSystem``, ``GcsFileSystem`` and
    ``AzureFileSystem`` with ``kwargs`` (e.g. ``endpoint_override``, ``access_key``, ``region``);
    a ``FileSystem`` instance is used as it is; ``None`` lets Ray Data infer it from the paths.
    """
    kwargs = dict(kwargs or {})
    kwargs_field = f"{field}_kwargs"
    if isinstance(filesystem, pafs.FileSystem) and kwargs:
        raise ConfigError(f"{kwargs_field} (keys {sorted(kwargs)}) are not used with a "
                          f"pyarrow.fs.FileSystem instance as {field}; configure the "
                          f"instance itself, or set {field} to one of {sorted(FILESYSTEMS)}")
    if filesystem is None and kwargs:
        raise ConfigError(f"{kwargs_field} (keys {sorted(kwargs)}) need {field}: "
                          f"set it to one of {sorted(FILESYSTEMS)}")
    if filesystem is None or isinstance(filesystem, pafs.FileSystem):
        return filesystem
    if not isinstance(filesystem, str) or filesystem not in FILESYSTEMS:
        raise ConfigError(
            f"{field}={filesystem!r} is not supported; use one of {sorted(FILESYSTEMS)}, "
            "a pyarrow.fs.FileSystem instance, or None to infer it from the paths"
        )
    name = FILESYSTEMS[filesystem]
    cls = getattr(pafs, name, None)
    if cls is None:
        raise ConfigError(f"{field}={filesystem!r} needs pyarrow.fs.{name}, which this "
                          "pyarrow build lacks; install a pyarrow wheel built with it")
    try:
        return cls(**kwargs)
    except TypeError as error:  # an unknown keyword; values are not shown (they hold secrets)
        raise ConfigError(f"{kwargs_field} (keys {sorted(kwargs)}) do not fit "
                          f"pyarrow.fs.{name}: {error}") from error


#: Ray Data's scheme for files on the driver's node (RLlib's examples use it): a local path.
LOCAL_SCHEME = "local://"


def without_local_scheme(path: str) -> str:
    """``path`` without Ray Data's ``local://`` prefix (files on this node).

    Examples:
        >>> without_local_scheme("local:///data/cartpole"), without_local_scheme("s3://b/x")
        ('/data/cartpole', 's3://b/x')
    """
    return path[len(LOCAL_SCHEME):] if path.startswith(LOCAL_SCHEME) else path


def is_uri(path: str) -> bool:
    """Whether ``path`` has a scheme (``s3://``, ``gs://``, ``file://``, ...)."""
    return bool(_URI.match(path))


def absolute_path(path: str) -> str:
    """A local path made absolute against this process's working folder, a URI as it is: what
    a Ray worker, whose working folder is its own, must be handed.

    Examples:
        >>> absolute_path("data/x") == os.path.join(os.getcwd(), "data/x")
        True
        >>> absolute_path("s3://bucket/x")
        's3://bucket/x'
    """
    return path if is_uri(path) else os.path.abspath(path)


def filesystem_path(path: str, filesystem: pafs.FileSystem | None) -> str:
    """The path as ``filesystem`` expects it: ``s3://bucket/key`` -> ``bucket/key`` (paths
    stay as they are without a filesystem: Ray Data then infers one from the scheme)."""
    return path.split("://", 1)[1] if filesystem is not None and is_uri(path) else path
