"""A custom input reader's calls, each bounded in time and named when it fails.

A read task builds its reader and calls its ``next()`` through ``ReaderCalls``: every call runs
in one thread of the read task's own (so a reader that keeps a connection per thread sees one
thread), and the read task waits at most ``timeout_s`` for it. A call that raises becomes an
``InputReaderError`` naming the reader, its ``worker_index`` and the call, the reader's
exception its ``__cause__``; a call still running after ``timeout_s`` becomes one too, and the
read task fails (Python cannot stop the hung call: its thread is left to end with the read
task's process).

Examples:
    >>> calls = ReaderCalls(worker_index=0, timeout_s=5.0)
    >>> calls.call(lambda: {"t": [1]}, "next() call 0")
    {'t': [1]}
    >>> calls.call(lambda: next(iter([])), "next() call 1") is END
    True
    >>> try:
    ...     calls.call(lambda: 1 / 0, "next() call 2")
    ... except InputReaderError as error:
    ...     print(str(error).split(" (at ")[0], "| cause:", repr(error.__cause__))
    ... finally:
    ...     calls.close()
    input reader (worker_index 0), next() call 2 raised ZeroDivisionError: division by zero \
| cause: ZeroDivisionError('division by zero')
"""

from __future__ import annotations

import queue
import threading
import traceback
from collections.abc import Callable
from typing import Any

from ray import cloudpickle

from offline_rl.errors import InputReaderError

#: What ``ReaderCalls.call`` returns for a call that raised ``StopIteration``: the reader ended.
END = object()


class ReaderCalls:
    """Runs a reader's calls one at a time in a thread of their own, each for at most
    ``timeout_s`` seconds (see the module); ``name`` names the reader once it is built."""

    def __init__(self, *, worker_index: int, timeout_s: float) -> None:
        self.worker_index = worker_index
        self.timeout_s = timeout_s
        self.name = f"input reader (worker_index {worker_index})"
        self._calls: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self._results: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name=f"input-reader-{worker_index}")
        self._thread.start()

    def named(self, reader: Any) -> None:
        """Names the calls after ``reader``: its class and ``worker_index``."""
        self.name = f"input reader {type(reader).__name__} (worker_index {self.worker_index})"

    def call(self, function: Callable[[], Any], what: str) -> Any:
        """``function()``'s result (``END`` for ``StopIteration``); ``InputReaderError`` naming
        the reader and ``what`` when it raises or runs past ``timeout_s``."""
        self._calls.put(function)
        try:
            ok, result = self._results.get(timeout=self.timeout_s)
        except queue.Empty:
            raise InputReaderError(
                f"{self.name}, {what} did not return within input_reader_timeout_s="
                f"{self.timeout_s:g} s; the reader may be blocked (on a lock, a socket, a "
                "queue). Fix the reader, or raise config.offline_data(input_reader_timeout_s="
                "...) if its calls are that slow") from None
        if ok:
            return result
        if isinstance(result, StopIteration):
            return END
        error = InputReaderError(
            f"{self.name}, {what} raised {type(result).__name__}: {result}{_where(result)}; "
            "fix the reader, or have it catch what it can recover from")
        error.__cause__ = result if _pickles(result) else None
        raise error

    def close(self) -> None:
        """Ends the calls' thread once its call (if any) returns."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (function := self._calls.get()) is not None:
            try:
                self._results.put((True, function()))
            except BaseException as error:  # handed to the read task, which raises it
                self._results.put((False, error))


def _where(error: BaseException) -> str:
    """`` (at file:line in function)``: the innermost frame of ``error``'s traceback."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f" (at {frame.filename}:{frame.lineno} in {frame.name})"


def _pickles(error: BaseException) -> bool:
    """Whether ``error`` survives pickling, as Ray pickles the read task's error to the caller."""
    try:
        cloudpickle.loads(cloudpickle.dumps(error))
    except Exception:
        return False
    return True
