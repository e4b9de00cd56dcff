"""The errors offline-rl raises on purpose, and how they reach the caller through Ray.

Every error offline-rl raises about the user's data, config or cluster is an ``OfflineRLError``.
Raised inside a Ray task or actor (a PreLearner, a remote learner, a recording actor), Ray wraps
it (``RayTaskError``, Ray Data's ``UserCodeException``); ``surface_errors`` unwraps it at the
public entry points, so ``except DataFormatError:`` around ``algo.train()`` catches it, with our
message and Ray's error chained as ``__cause__``.

Examples:
    >>> @surface_errors
    ... def train():
    ...     try:
    ...         raise DataFormatError("part.parquet: column 'rewards' holds strings")
    ...     except DataFormatError as error:  # what Ray does to an actor's error
    ...         raise RuntimeError("task failed") from error
    >>> try:
    ...     train()
    ... except DataFormatError as error:
    ...     print(error, "| cause:", error.__cause__)
    part.parquet: column 'rewards' holds strings | cause: task failed
"""

from __future__ import annotations

import copy
import functools
import inspect
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

Function = TypeVar("Function", bound=Callable[..., Any])
#: offline-rl's own source folder (``warn_at_caller`` skips the frames in it).
PACKAGE_DIR = str(Path(__file__).resolve().parent)


def warn_at_caller(message: str) -> None:
    """A ``UserWarning`` shown at the first caller outside offline-rl: the user's line."""
    frame, level = inspect.currentframe(), 0
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level + 1)


class OfflineRLError(Exception):
    """Base of the errors offline-rl raises about the user's data, config or cluster.

    ``message`` keeps the message as raised: Ray Data appends its retry advice to the
    ``args`` of an error that crosses a map function, and ``surface_errors`` restores it.
    """

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(message, *args)
        self.message = message


class DataFormatError(OfflineRLError, ValueError):
    """The data does not have the layout or values offline-rl reads; the message says where
    (file, column, row or episode) and what was expected."""


class DataNotFoundError(OfflineRLError, FileNotFoundError):
    """The input (or output) location does not exist or holds no data files."""


class ConfigError(OfflineRLError, ValueError):
    """A config value is invalid or the values contradict each other; the message names them."""


class ResourceError(OfflineRLError, RuntimeError):
    """The cluster cannot hold what the config asks for (CPUs, GPUs, actors)."""


class CheckpointError(DataFormatError):
    """A checkpoint folder cannot be loaded: a file is missing, is not a regular file inside the
    folder, is over its size cap, or is damaged; the message names the file and the fault."""


class CheckpointWriteError(OfflineRLError, OSError):
    """A checkpoint could not be written (a full disk, say); a previous checkpoint of the same
    name is left as it was."""


class OutputError(OfflineRLError, OSError):
    """An output location cannot be written as asked: it is a file, cannot be written, is the
    input itself, or holds files offline-rl did not write; the message names them and how to
    go on (another folder, or ``overwrite``, which still replaces only offline-rl's own files)."""


class TrainingError(OfflineRLError, RuntimeError):
    """Training cannot go on: a loss became NaN or infinite, or a loss was given tensors of
    other shapes than it computes with; the message names the update, the loss and the likely
    causes."""


class EnvError(OfflineRLError, RuntimeError):
    """An env failed while offline-rl played it (the sampler, evaluation, recording): it raised
    in ``reset()`` or ``step()``, or an episode ran past its time without ending; the message
    names the env, who played it, the episode and the step, and what to change."""


class InputReaderError(OfflineRLError, RuntimeError):
    """A custom input reader failed: its creator or ``next()`` raised (that exception is the
    ``__cause__``, kept across Ray when it pickles), or did not return within
    ``input_reader_timeout_s``; the message names the reader, its ``worker_index`` and the
    call."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (by Ray, to the caller) with its ``__cause__``, the reader's exception."""
        return type(self), self.args, {**self.__dict__, "__cause__": self.__cause__}


class UnknownModuleError(ConfigError, KeyError):
    """A module id names none of the modules there are; the message names those.

    Examples:
        >>> str(UnknownModuleError("no module 'x'; the modules are ['default_policy']"))
        "no module 'x'; the modules are ['default_policy']"
    """

    def __str__(self) -> str:
        return self.message


def find_error(error: BaseException) -> OfflineRLError | None:
    """The ``OfflineRLError`` that ``error`` is or wraps (through Ray's ``cause``, ``__cause__``
    and ``__context__``), or ``None``."""
    return next((wrapped for wrapped in error_chain(error) if isinstance(wrapped, OfflineRLError)
                 and not _is_ray_wrapper(wrapped)), None)


def _is_ray_wrapper(error: BaseException) -> bool:
    """Ray's ``RayTaskError`` subclasses itself per cause (``RayTaskError(DataFormatError)``);
    such an error is an instance of ours but prints Ray's whole remote traceback."""
    return any(cls.__module__.startswith("ray.") for cls in type(error).__mro__)


def surface_errors(function: Function) -> Function:
    """Decorates a public entry point: an ``OfflineRLError`` wrapped by Ray is raised as itself
    (a copy, with the Ray error as ``__cause__``, or as ``__context__`` where the copy kept a
    cause of its own: ``InputReaderError``'s); every other error passes unchanged.

    The Ray errors' local tracebacks are dropped (the remote one stays in their message): their
    frames hold the failed Ray Data execution, whose actors would live, holding their CPUs, for
    as long as the caller keeps the error."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as error:
            ours = find_error(error)
            if ours is None or ours is error:
                raise
            # an error that kept its own cause across Ray (the user's) keeps it; Ray's error
            # stays its __context__
            copied = surfaced(error, ours)
            raise copied from (copied.__cause__ or error)

    return wrapper  # type: ignore[return-value]


def surfaced(error: BaseException, ours: OfflineRLError, prefix: str = "") -> OfflineRLError:
    """A copy of ``ours`` (the error ``error`` is or wraps: ``find_error``) to raise in
    ``error``'s place, its message as raised with ``prefix`` before it; the tracebacks of
    ``error``'s chain are dropped (see ``surface_errors``)."""
    copied = copy.copy(ours)
    copied.message = prefix + ours.message
    copied.args = (copied.message, *ours.args[1:])
    for wrapped in error_chain(error):
        wrapped.__traceback__ = None
    return copied.with_traceback(None)


def error_chain(error: BaseException) -> list[BaseException]:
    """``error`` and every error it wraps (Ray's ``cause``, ``__cause__``, ``__context__``)."""
    chain: list[BaseException] = []
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or any(current is seen for seen in chain):
            continue
        chain.append(current)
        pending += [getattr(current, "cause", None), current.__cause__, current.__context__]
    return chain


def name_iteration(error: Exception, iteration: int) -> Exception:
    """``error`` as ``Algorithm.train`` raises it in training iteration ``iteration``: a
    ``TrainingError`` (raised here or by a remote learner, wrapped by Ray) with the iteration
    named first, its cause ``error``; any other error unchanged."""
    found = find_error(error)
    if not isinstance(found, TrainingError):
        return error
    if found is not error:  # Ray's wrappers: their frames would keep the pipeline alive
        for wrapped in error_chain(error):
            wrapped.__traceback__ = None
    named = TrainingError(f"training iteration {iteration}, {found.message}")
    named.__cause__ = error
    return named
