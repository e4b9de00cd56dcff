"""Ray Data executions that one thread runs and another can stop.

A stream builds its dataset in a background thread: reading, mapping and ``materialize()``
can take minutes. Stopping the stream must stop that execution too; left running, it keeps
Ray Data's executor busy after the pipeline's actors are gone, and touches Ray after
``ray.shutdown()`` (Ray Data then even starts a new local Ray instance). Ray Data has no
public way to cancel an execution, but it calls an ``ExecutionCallback`` when one starts:
``materialize`` registers one on the dataset, which records each executor under the thread
that started it, and ``stop_executions`` shuts those executors down from any thread.

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

import threading
import weakref
from typing import TYPE_CHECKING

from ray.data._internal.execution.execution_callback import ExecutionCallback

if TYPE_CHECKING:
    import ray.data
    from ray.data._internal.execution.streaming_executor import StreamingExecutor

_lock = threading.Lock()
#: The executors running, by the thread that started them.
_running: weakref.WeakKeyDictionary[threading.Thread, set[StreamingExecutor]] = (
    weakref.WeakKeyDictionary())
#: Threads whose executions were stopped: they may start no new one.
_stopped: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


class ExecutionStopped(RuntimeError):
    """A Ray Data execution was stopped (or refused) by ``stop_executions``; what it produced
    is incomplete and is not used."""


class _RecordByThread(ExecutionCallback):
    """Ray Data's hook (instantiated by its planner, without arguments): records each
    execution under the thread that starts it, and refuses to start one in a stopped
    thread."""

    def before_execution_starts(self, executor: StreamingExecutor) -> None:
        thread = threading.current_thread()
        with _lock:
            if thread in _stopped:  # stopped since ``materialize`` checked
                raise ExecutionStopped(f"the Ray Data executions of {thread.name} were stopped")
            _running.setdefault(thread, set()).add(executor)

    def after_execution_succeeds(self, executor: StreamingExecutor) -> None:
        _forget(executor)

    def after_execution_fails(self, executor: StreamingExecutor, error: Exception) -> None:
        _forget(executor)


def _forget(executor: StreamingExecutor) -> None:
    with _lock:
        for executors in _running.values():
            executors.discard(executor)


def materialize(dataset: ray.data.Dataset) -> ray.data.MaterializedDataset:
    """``dataset.materialize()``, stoppable by ``stop_executions`` on the calling thread;
    raises ``ExecutionStopped`` instead of returning the part it had produced when stopped."""
    _refuse_if_stopped(threading.current_thread())
    context = dataset.context
    if _RecordByThread not in context.custom_execution_callback_classes:
        context.custom_execution_callback_classes = [
            *context.custom_execution_callback_classes, _RecordByThread]
    materialized = dataset.materialize()
    _refuse_if_stopped(threading.current_thread())
    return materialized


def _refuse_if_stopped(thread: threading.Thread) -> None:
    with _lock:
        if thread in _stopped:
            raise ExecutionStopped(f"the Ray Data executions of {thread.name} were stopped")


def stop_executions(thread: threading.Thread) -> None:
    """Shuts down the executions ``thread`` runs through ``materialize`` (their tasks and
    actors), and refuses any it would start later."""
    with _lock:
        _stopped.add(thread)
        executors = _running.pop(thread, set())
    for executor in executors:
        executor.shutdown(force=True, exception=ExecutionStopped("stopped by its owner"))

