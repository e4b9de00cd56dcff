"""Ray Data executions that one thread runs and another can stop.

A stream builds and iterates its dataset in a background thread: reading, mapping and
``materialize()`` can take minutes, and each streamed epoch is an execution of its own.
Stopping the stream must stop that execution too; left running, it keeps Ray Data's executor
busy after the pipeline's actors are gone (an execution whose actors are killed while they
start logs their deaths as its failure, with a traceback), and touches Ray after
``ray.shutdown()`` (Ray Data then even starts a new local Ray instance). Ray Data has no
public way to cancel an execution, but it calls an ``ExecutionCallback`` when one starts and
at each step of its scheduling loop: ``stoppable`` registers one on the dataset, which
records the thread that started each execution, and ends the execution at its next step
(about every 0.1 s at most) once ``stop_executions`` has stopped that thread. Ray Data then
shuts the executor down itself, its actors with it (shutting it down from another thread
instead can leave the actors of an execution that was just starting behind). Ray Data's log of
that error and its "execution failed" line, in the stopped thread, are dropped: they report
the stop itself.

Examples:
    >>> import threading
    >>> import ray.data
    >>> outcome = []
    >>> def build():
    ...     try:
    ...         outcome.append(materialize(ray.data.range(10)).count())
    ...     except ExecutionStopped as stopped:
    ...         outcome.append(str(stopped))
    >>> stopped_early = threading.Thread(target=build, name="builder")
    >>> stop_executions(stopped_early)  # before it starts: it may start none
    >>> stopped_early.start(); stopped_early.join()
    >>> outcome
    ['the Ray Data executions of builder were stopped']
    >>> materialize(ray.data.range(10)).count()
    10
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import TYPE_CHECKING

from ray.data._internal.execution.execution_callback import ExecutionCallback

if TYPE_CHECKING:
    import ray.data
    from ray.data._internal.execution.streaming_executor import StreamingExecutor

_lock = threading.Lock()
#: The thread that started each execution.
_started_by: weakref.WeakKeyDictionary[StreamingExecutor, threading.Thread] = (
    weakref.WeakKeyDictionary())
#: Threads whose executions were stopped: they may run no more of them.
_stopped: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


class ExecutionStopped(RuntimeError):
    """A Ray Data execution was stopped (or refused) by ``stop_executions``; what it produced
    is incomplete and is not used."""


class _StopWhenAsked(ExecutionCallback):
    """Ray Data's hook (instantiated by its planner, without arguments): records the thread
    that starts each execution, and ends the execution at its next scheduling step once that
    thread was stopped (the error reaches the thread, and Ray Data shuts the executor down)."""

    def before_execution_starts(self, executor: StreamingExecutor) -> None:
        with _lock:
            _started_by[executor] = threading.current_thread()

    def on_execution_step(self, executor: StreamingExecutor) -> None:
        with _lock:
            thread = _started_by.get(executor)
            stopped = thread is not None and thread in _stopped
        if stopped:
            raise ExecutionStopped(f"the Ray Data executions of {thread.name} were stopped")


class _QuietWhenStopped(logging.Filter):
    """Drops what Ray Data logs of an execution in a stopped thread: its report of the error
    ("Exception occurred in Ray Data or Ray Core internal code", with a traceback) and its
    "execution failed" line; the error is the stop."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _lock:
            return threading.current_thread() not in _stopped


#: The loggers of Ray Data's error reports and its executor's lines.
_QUIETED_LOGGERS = ("ray.data.exceptions", "ray.data._internal.execution.streaming_executor")
_QUIET_WHEN_STOPPED = _QuietWhenStopped()


def stoppable(dataset: ray.data.Dataset) -> ray.data.Dataset:
    """``dataset``, whose executions (``materialize``, each ``iter_batches`` pass) end at their
    next step once ``stop_executions`` has stopped the thread that started them; Ray Data's
    report of that error in the stopped thread is dropped. Returns ``dataset``."""
    for name in _QUIETED_LOGGERS:
        if _QUIET_WHEN_STOPPED not in (logger := logging.getLogger(name)).filters:
            logger.addFilter(_QUIET_WHEN_STOPPED)
    context = dataset.context
    if _StopWhenAsked not in context.custom_execution_callback_classes:
        context.custom_execution_callback_classes = [
            *context.custom_execution_callback_classes, _StopWhenAsked]
    return dataset


def materialize(dataset: ray.data.Dataset) -> ray.data.MaterializedDataset:
    """``dataset.materialize()``, stoppable by ``stop_executions`` on the calling thread;
    raises ``ExecutionStopped`` instead of returning the part it had produced when stopped."""
    _refuse_if_stopped(threading.current_thread())
    materialized = stoppable(dataset).materialize()
    _refuse_if_stopped(threading.current_thread())
    return materialized


def _refuse_if_stopped(thread: threading.Thread) -> None:
    with _lock:
        if thread in _stopped:
            raise ExecutionStopped(f"the Ray Data executions of {thread.name} were stopped")


def stop_executions(thread: threading.Thread) -> None:
    """Ends the executions ``thread`` runs through ``materialize`` at their next scheduling
    step, and refuses any it would start later."""
    with _lock:
        _stopped.add(thread)
