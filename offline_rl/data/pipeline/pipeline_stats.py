"""What Ray Data reports of an execution of the pipeline: rows, time and backpressure of each
operator, and the time spent in the PreLearners."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import ray
import ray.data
from ray.data._internal.stats import DatasetStatsSummary
from ray.data.dataset import MaterializedDataset

#: Seconds ``split_stats_summary`` waits for an execution that is starting; its polling period.
STATS_TIMEOUT_S = 60.0
STATS_POLL_S = 0.05


def pipeline_figures(summary: DatasetStatsSummary, prelearner_name: str) -> dict[str, Any]:
    """``{"operators": {name: figures}, "prelearner_s": seconds}`` from Ray Data's stats
    summary of an execution, operators in execution order. Each operator's figures:

    - ``rows``: rows it output;
    - ``wall_s``: from its first task's start to its last one's end;
    - ``task_s``: the summed wall time of its tasks, ``udf_s`` the part in the functions it
      runs (Ray Data's "function body time": for a read, the reading);
    - ``submission_backpressure_s``: how long Ray Data held back its new tasks (downstream,
      or memory, was full), ``output_backpressure_s``: how long its finished outputs were
      left unread.

    ``prelearner_s`` is the ``udf_s`` of the operators that run ``prelearner_name``'s
    ``map_batches`` (with what Ray Data fused into them, as their names say).

    Examples:
        >>> class Double:
        ...     def __call__(self, batch):
        ...         return {"x": batch["id"] * 2}
        >>> dataset = ray.data.range(100).map_batches(
        ...     Double, compute=ray.data.ActorPoolStrategy(size=1)).materialize()
        >>> figures = pipeline_figures(dataset.get_stats_summary(), "Double")
        >>> [(name, op["rows"]) for name, op in figures["operators"].items()][-1]
        ('ReadRange->MapBatches(Double)', 100)
        >>> figures["prelearner_s"] > 0
        True
    """
    operators: dict[str, dict[str, Any]] = {}
    for level in _execution_order(summary):
        stats = [op for op in level.operators_stats if not op.is_sub_operator]
        if not stats:
            continue
        op, metrics = stats[0], level.extra_metrics
        task_s = op.wall_time.sum if op.wall_time else 0.0
        operators[op.operator_name] = {
            "rows": int(op.output_num_rows.sum) if op.output_num_rows else 0,
            "wall_s": float(op.time_total_s),
            "task_s": float(task_s),
            "udf_s": float(op.function_body_time.sum if op.function_body_time else task_s),
            "submission_backpressure_s": float(
                metrics.get("task_submission_backpressure_time", 0.0)),
            "output_backpressure_s": float(metrics.get("task_output_backpressure_time", 0.0)),
        }
    prelearner_s = sum(figures["udf_s"] for name, figures in operators.items()
                       if f"MapBatches({prelearner_name})" in name)
    return {"operators": operators, "prelearner_s": prelearner_s}


def _execution_order(summary: DatasetStatsSummary) -> Iterator[DatasetStatsSummary]:
    """The summary's levels, the first operators (its parents) first."""
    for parent in summary.parents:
        yield from _execution_order(parent)
    yield summary


def split_stats_summary(shard: ray.data.DataIterator,
                        timeout_s: float = STATS_TIMEOUT_S) -> DatasetStatsSummary:
    """The stats summary of the execution behind a ``streaming_split`` shard, which runs in
    Ray Data's split coordinator actor, not in this process. The shard's public ``stats()``
    only renders it as text; the coordinator answers it on a spare concurrency slot.

    While the coordinator sets up the next epoch's execution (the learners' streams start it
    as soon as they have read an epoch's end; starting its PreLearner actors takes seconds),
    Ray Data 2.60's coordinator fails the call with ``TypeError: 'NoneType' object is not
    iterable`` (its new executor has no topology yet). That window is waited out, polling for
    at most ``timeout_s`` seconds, after which the error is raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get(shard._coord_actor.stats.remote()).to_summary()
        except TypeError:  # RayTaskError(TypeError): the next execution is starting
            if time.monotonic() > deadline:
                raise
            time.sleep(STATS_POLL_S)


class ExecutionFigures:
    """``pipeline_figures`` of a pipeline's execution: the one pass that materialized the
    mapped data (final, so read from Ray Data once), else the current epoch's streaming
    execution (in Ray Data's split coordinator when ``shards`` were split off); ``{}`` before
    it starts."""

    def __init__(self) -> None:
        self._final: tuple[ray.data.Dataset | None, dict[str, Any]] = (None, {})

    def of(self, dataset: ray.data.Dataset | None, shards: list[ray.data.DataIterator],
           prelearner_name: str) -> dict[str, Any]:
        """The figures of ``dataset``'s execution (or of its ``shards``')."""
        read_from, figures = self._final
        if dataset is not None and read_from is dataset:
            return copy.deepcopy(figures)
        materialized = isinstance(dataset, MaterializedDataset)
        if shards and not materialized:
            summary = split_stats_summary(shards[0])
        elif dataset is not None:
            summary = dataset.get_stats_summary()
        else:
            return {}
        figures = pipeline_figures(summary, prelearner_name)
        if materialized:
            self._final = (dataset, copy.deepcopy(figures))
        return figures
