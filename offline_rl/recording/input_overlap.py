"""Whether a recording's output overlaps an input of the config: recording there would mix new
episodes into the data trained (or evaluated) on.

An output overlaps an input when it is the input, is inside it, or holds it (an input file or
folder inside the output folder: a later read of the output reads the training data too).
Paths are compared as the readers see them: a local path (relative, with ``..``, a trailing
slash or through a symbolic link) or a ``file://`` URI by the real local path it names, any
other URI by its scheme, host and path; a glob by its fixed folder (the folder before its
first wildcard), since a folder under it may match. Every path of an input counts: a list, and
each source of a mix (``"sampler"`` left out).

Examples:
    >>> import tempfile
    >>> data = tempfile.mkdtemp()
    >>> overlap_problem(f"file://{data}/", {"the training input": f"{data}/*.parquet"}) == (
    ...     f"is the training input {data + '/*.parquet'!r} or inside it")
    True
    >>> overlap_problem(f"{data}-recorded", {"the training input": [data]}) is None
    True
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from offline_rl.filesystems import is_uri
from offline_rl.settings.sources import SAMPLER

#: The first wildcard of a glob (what ``ray.data`` and pyarrow expand).
_WILDCARD = re.compile(r"[*?\[]")


def overlap_problem(output: str, inputs: Mapping[str, Any]) -> str | None:
    """How ``output`` overlaps one of ``inputs`` (``{what the input is: input_}``, each a path,
    glob or URI, a list of them, or a mix of sources), said as ``"is the training input 'x' or
    inside it"`` or ``"holds the training input 'x'"``; ``None`` when it overlaps none."""
    target, _ = _location(output)
    for what, input_ in inputs.items():
        for path in input_paths(input_):
            folder, patterns = _location(path)
            below = _parts_below(target, folder)
            if below is not None and all(
                    pattern == "**" or fnmatch.fnmatchcase(part, pattern)
                    for part, pattern in zip(below, patterns)):
                return f"is {what} {path!r} or inside it"
            if _parts_below(folder, target) is not None:
                return f"holds {what} {path!r}"
    return None


def input_paths(input_: Any) -> list[str]:
    """Every path (or glob, or URI) ``input_`` names: a path, a list of them, or a mix of
    sources (``{path: weight}``, or a list of ``{"input_": path(s), ...}``), or a list of such
    inputs; the sampler and anything that names no path (a custom input's creator) left
    out."""
    if isinstance(input_, str):
        return [input_] if input_ and input_ != SAMPLER else []
    if isinstance(input_, Mapping):
        return [path for key in input_ for path in input_paths(key)]
    if isinstance(input_, list | tuple):
        return [path for item in input_ for path in input_paths(
            item["input_"] if isinstance(item, Mapping) and "input_" in item else item)]
    return []


def _parts_below(path: str, folder: str) -> list[str] | None:
    """The names of ``path`` below ``folder`` (``[]``: the folder itself), or ``None`` when
    ``path`` is not inside it."""
    if path == folder:
        return []
    prefix = folder.rstrip("/") + "/"
    return path[len(prefix):].split("/") if path.startswith(prefix) else None


def _location(path: str) -> tuple[str, list[str]]:
    """The folder ``path`` reads and, for a glob, the patterns of the names below it (a glob's
    fixed folder is the part before its first wildcard): a local path (or ``file://`` URI) as
    its real absolute path; another URI with its scheme lower-cased and its slashes tidied."""
    patterns: list[str] = []
    wildcard = _WILDCARD.search(path)
    if wildcard:
        head, slash, _ = path[:wildcard.start()].rpartition("/")
        patterns = [part for part in path[len(head + slash):].split("/") if part]
        path = head + slash if slash else "."
    if path.lower().startswith("file://"):
        path = unquote(path[len("file://"):])
    if is_uri(path):
        scheme, rest = path.split("://", 1)
        return f"{scheme.lower()}://{re.sub('/+', '/', rest).rstrip('/')}", patterns
    return os.path.realpath(path or "."), patterns
