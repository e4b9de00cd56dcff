"""Many epochs in one Ray Data execution, so that streamed epochs do not restart the pipeline.

When the mapped data is streamed (``materialize_mapped_data=False``, as for MARWIL, whose
learner connector needs the current module), each epoch used to be one Ray Data execution:
a new actor pool of PreLearners every epoch, a stall of seconds on small data. When the raw
input is materialized (``materialize_data=True``), the stream instead runs one execution over
many epochs (``PARTS_PER_EXECUTION`` PreLearner calls or more): the input is cut into parts
of one PreLearner call each, and the same PreLearner actors map part after part, epoch after
epoch, tagging each row with its epoch (``EPOCH_COLUMN``) for ``EpochBatches`` to find the
epochs' ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import ray
import ray.data

from offline_rl.data.feed.epoch_batches import EPOCH_COLUMN
from offline_rl.data.prelearner.call_output import arrow_table
from offline_rl.data.prelearner.prelearner import map_in_process, overrides_call
from offline_rl.data.ray.stoppable_executions import materialize
from offline_rl.data.source.input_reader import quiet_data_context
from offline_rl.errors import DataFormatError
from offline_rl.rows import take_rows

#: PreLearner calls planned per execution, at least: the execution starts again after them,
#: with a new PreLearner pool (a stall of seconds: about 3 s for one actor on 2 CPUs; 14 actors
#: on 16 CPUs gave their first batch 9 s after ``build()``).
PARTS_PER_EXECUTION = 1024
#: Ray tasks planned per execution (at least ``PARTS_PER_EXECUTION`` calls): each task is a block
#: of call ids made when the execution starts (about 0.7 ms each).
TASKS_PER_EXECUTION = 256
#: PreLearner calls per Ray task (a task's start costs more than a call on small data), but
#: for PreLearners that need the module: one call each, as a task runs ahead of the learners
#: for all its calls (with 32, Pendulum's 5 parts were mapped 16 epochs ahead, with weights
#: some 2,500 updates old).
CALLS_PER_TASK = 32
#: The object store the execution may fill ahead of its consumer. PreLearners that need the
#: module: at most ``PARTS_AHEAD`` parts of the raw input (so they map with weights at most
#: about this many parts old). Others: ``TASKS_AHEAD_PER_ACTOR`` tasks' worth of parts per
#: actor, at least ``MIN_AHEAD_BYTES`` and at most ``AHEAD_STORE_SHARE`` of the cluster's object
#: store (a budget of 48 MiB for 14 actors held them to 1.0-1.5M rows/s, with stalls of 0.3 s
#: every 72 batches; 512 MiB let them deliver 4.6-6.3M).
PARTS_AHEAD = 8
TASKS_AHEAD_PER_ACTOR = 4
MIN_AHEAD_BYTES = 48 * 2**20
AHEAD_STORE_SHARE = 0.25


class EpochsPreLearner:
    """Maps part after part of the materialized input through one PreLearner, for a plan of
    many epochs: call ``id`` is part ``id % len(parts)`` of epoch ``first_epoch + id //
    len(parts)``. The parts come in a new order every epoch and the rows of each part's output
    in a new order every time, both drawn from ``plan_seed``, so every actor agrees on them and
    a seeded run repeats them (episode inputs' rows, drawn from the PreLearner's episode buffer
    already at random, keep their order). Each output row is tagged with its epoch
    (``EPOCH_COLUMN``).

    Examples:
        >>> import gymnasium as gym, numpy as np, pyarrow as pa, ray
        >>> from offline_rl import BCConfig
        >>> from offline_rl.data.prelearner.prelearner import OfflinePreLearner
        >>> config = BCConfig().environment("CartPole-v1")
        >>> rows = pa.table({"obs": [[0.0, 0.1]] * 3, "new_obs": [[0.2, 0.3]] * 3,
        ...                  "actions": [0, 1, 1], "rewards": [1.0] * 3,
        ...                  "terminateds": [False] * 3})
        >>> spaces = (gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2))
        >>> epochs = EpochsPreLearner(parts=[ray.put(rows)], first_epoch=4, plan_seed=0,
        ...                           prelearner_class=OfflinePreLearner, config=config,
        ...                           spaces=spaces)
        >>> batch = epochs({"id": np.array([1])})
        >>> batch["__epoch"].to_pylist(), sorted(batch["actions"].to_pylist())
        ([5, 5, 5], [0, 1, 1])
    """

    def __init__(self, *, parts: list[ray.ObjectRef], first_epoch: int, plan_seed: int,
                 prelearner_class: type, **prelearner_kwargs: Any):
        self.parts = parts
        self.first_epoch = first_epoch
        self.plan_seed = plan_seed
        self.prelearner = prelearner_class(**prelearner_kwargs)
        self._shuffles_rows = (overrides_call(prelearner_class)
                               or not self.prelearner.config.reads_episodes)
        #: The last epoch mapped and its order of the parts (drawn once per epoch, not per call).
        self._part_order: tuple[int, np.ndarray] = (-1, np.arange(0))

    def __call__(self, ids: dict[str, np.ndarray]) -> pa.Table | dict[str, np.ndarray]:
        outputs = [output for output in map(self._map_part, ids["id"].tolist()) if output]
        if not outputs:
            return {}
        return arrow_table(outputs[0] if len(outputs) == 1 else
                           {name: np.concatenate([output[name] for output in outputs])
                            for name in outputs[0]})

    def _map_part(self, call: int) -> dict[str, np.ndarray]:
        epoch, slot = divmod(call, len(self.parts))
        epoch += self.first_epoch
        if self._part_order[0] != epoch:
            self._part_order = (epoch, np.random.default_rng((self.plan_seed, epoch))
                                .permutation(len(self.parts)))
        part = self._part_order[1][slot]
        columns = map_in_process(self.prelearner, ray.get(self.parts[part]))
        if not columns:
            return {}
        columns = {name: np.asarray(column) for name, column in columns.items()}
        rows = len(next(iter(columns.values())))
        if self._shuffles_rows:
            order = np.random.default_rng((self.plan_seed, epoch, int(part))).permutation(rows)
            columns = take_rows(columns, order)
        return {**columns, EPOCH_COLUMN: np.full(rows, epoch, np.int64)}


@dataclass(frozen=True)
class InputParts:
    """The raw input in Ray's object store, in parts of one PreLearner call each, and the mean
    bytes of a part."""

    refs: list[ray.ObjectRef]
    part_bytes: float

    @classmethod
    def of(cls, source: ray.data.Dataset, rows_per_part: int, input_name: object) -> InputParts:
        """``source`` read and materialized in blocks of ``rows_per_part`` rows (Ray Data's
        ``repartition``); a ``DataFormatError`` naming ``input_name`` when it holds none."""
        raw = materialize(source.repartition(target_num_rows_per_block=rows_per_part))
        refs = raw.to_arrow_refs()
        if not refs:
            raise DataFormatError(f"the input {input_name} holds no rows")
        return cls(refs, raw.size_bytes() / len(refs))


def plan_epochs(parts: InputParts, *, first_epoch: int, plan_seed: int,
                prelearner_class: type, prelearner_kwargs: dict[str, Any],
                map_batches_kwargs: dict[str, Any]) -> ray.data.Dataset:
    """The dataset of as many whole epochs from ``first_epoch`` on as ``PARTS_PER_EXECUTION``
    and ``TASKS_PER_EXECUTION`` plan (at least one), mapped by one pool of ``EpochsPreLearner``
    actors (``map_batches_kwargs``), ``CALLS_PER_TASK`` calls per task, in order, at most
    ``look_ahead_bytes`` ahead of its consumer (see the constants for PreLearners that need the
    module: ``prelearner_kwargs`` with ``module_weights``)."""
    needs_module = prelearner_kwargs.get("module_weights") is not None
    calls_per_task = 1 if needs_module else CALLS_PER_TASK
    calls = max(PARTS_PER_EXECUTION, TASKS_PER_EXECUTION * calls_per_task)
    count = max(1, calls // len(parts.refs)) * len(parts.refs)
    actors = getattr(map_batches_kwargs.get("compute"), "max_size", None) or 1
    ahead = look_ahead_bytes(parts.part_bytes, actors=actors, needs_module=needs_module,
                             object_store_bytes=ray.cluster_resources()["object_store_memory"])
    with quiet_data_context(preserve_order=True, object_store_memory=ahead):
        # The call ids are blocks in memory: ``ray.data.range`` would read each in a task of
        # its own, one at a time under the small budget of PreLearners that need the module
        # (a first epoch of 16 s instead of 7 on 2 CPUs).
        call_ids = ray.data.from_items([{"id": call} for call in range(count)],
                                       override_num_blocks=-(-count // calls_per_task))
        return call_ids.map_batches(
            EpochsPreLearner, batch_size=1, batch_format="numpy",
            fn_constructor_kwargs={"parts": parts.refs, "first_epoch": first_epoch,
                                   "plan_seed": plan_seed, "prelearner_class": prelearner_class,
                                   **prelearner_kwargs},
            **map_batches_kwargs)


def look_ahead_bytes(part_bytes: float, *, actors: int, needs_module: bool,
                     object_store_bytes: float) -> int:
    """The object store an execution of ``plan_epochs`` may fill ahead of its consumer, for
    parts of ``part_bytes`` mapped by ``actors`` PreLearner actors (see ``PARTS_AHEAD``).

    Examples:
        >>> look_ahead_bytes(2**20, actors=1, needs_module=True, object_store_bytes=2**33)
        8388608
        >>> look_ahead_bytes(2**20, actors=14, needs_module=False, object_store_bytes=2**33)
        1879048192
        >>> look_ahead_bytes(2**20, actors=14, needs_module=False, object_store_bytes=2**32)
        1073741824
    """
    if needs_module:
        return int(PARTS_AHEAD * part_bytes)
    per_actor = TASKS_AHEAD_PER_ACTOR * CALLS_PER_TASK * part_bytes
    return int(min(max(MIN_AHEAD_BYTES, actors * per_actor),
                   AHEAD_STORE_SHARE * object_store_bytes))
