"""``PreLearnerPool``: what a pipeline's PreLearner actors hold in Ray, from start to stop.

Each ``OfflineData`` opens one when it starts: the pool's ``map_batches`` keywords, sized for
the cluster beside the rest of the run (``ResourcePlan.beside_pipeline``); the ledger book
its PreLearners count dropped data in (``LedgerTotals`` reads it without blocking); the
``ModuleWeights`` actor they read the learners' weights from, when the learner connector
needs the module. ``stop`` releases all of it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import ray

from offline_rl.data.pipeline.resources import prelearner_pool_kwargs
from offline_rl.data.prelearner.data_ledger import LedgerTotals, open_book
from offline_rl.data.prelearner.module_weights import ModuleWeights
from offline_rl.data.prelearner.prelearner import map_batches_callable, rows_per_call
from offline_rl.data.ray.actors import kill_actors, wait_for_cpus
from offline_rl.data.source.data_config import DataConfig
from offline_rl.placement import (
    available_cpus,
    keep_ray_data_in_placement_group,
    usable_resources,
)
from offline_rl.settings.resource_plan import ResourcePlan

#: Seconds ``stop()`` waits for the PreLearners' CPUs to come back (others may take them).
RELEASE_WAIT_S = 5.0


class PreLearnerPool:
    """The PreLearner pool of one pipeline of ``config`` for the data's ``spaces``, sized beside
    what ``resources`` plans for the rest of the run (nothing without a plan)."""

    def __init__(self, config: DataConfig, spaces: tuple[gym.Space, gym.Space], *,
                 needs_module: bool, resources: ResourcePlan | None = None):
        keep_ray_data_in_placement_group()
        self.config, self.spaces = config, spaces
        #: The pool's ``map_batches`` keywords (``compute``, ``num_cpus``, ...).
        self.kwargs = prelearner_pool_kwargs(
            config.offline_data.map_batches_kwargs, usable_resources(),
            reserved_cpus=0.0 if resources is None else resources.beside_pipeline)
        self.book = open_book()
        self.totals = LedgerTotals(self.book)
        self.module_weights: ray.actor.ActorHandle | None = (
            ModuleWeights.remote() if needs_module else None)
        #: Until ``stop()`` (after which the keywords and the counts still read).
        self.running = True

    def prelearner_kwargs(self) -> dict[str, Any]:
        """What each PreLearner is built with (RLlib's keywords, and the pool's parts)."""
        return {"config": self.config, "spaces": self.spaces, "ledger": self.book,
                "module_weights": self.module_weights, "module_spec": self.config.module_spec(),
                **self.config.offline_data.prelearner_kwargs}

    def mapped(self, source: ray.data.Dataset, prelearner_class: type) -> ray.data.Dataset:
        """``source`` mapped through this pool's ``prelearner_class`` actors
        (``rows_per_call`` rows per call)."""
        mapper, batch_format = map_batches_callable(prelearner_class)
        return source.map_batches(mapper, batch_size=rows_per_call(self.config),
                                  batch_format=batch_format,
                                  fn_constructor_kwargs=self.prelearner_kwargs(), **self.kwargs)

    def counts(self, *, wait: bool = False) -> dict[str, int]:
        """What the PreLearners counted so far, by reason (``LedgerTotals``: the latest totals
        that have arrived; with ``wait``, the current ones)."""
        return self.totals.now() if wait else self.totals.latest()

    def describe(self) -> dict[str, Any]:
        """``min_size``, ``max_size`` and the resources of each actor."""
        return {"min_size": getattr(self.kwargs["compute"], "min_size", None),
                "max_size": getattr(self.kwargs["compute"], "max_size", None),
                "num_cpus": self.kwargs["num_cpus"], "num_gpus": self.kwargs.get("num_gpus", 0)}

    def publish_weights(self, weights: dict[str, np.ndarray], version: int) -> None:
        """Hands the learners' module weights (after ``version`` updates) to the PreLearners;
        a no-op unless the learner connector needs the module."""
        if self.module_weights is not None:
            ray.get(self.module_weights.publish.remote([ray.put(weights)], version))

    def stop(self) -> None:
        """Kills the PreLearner actors (also those Ray Data would still be creating; never
        waited on) and the module weights' actor, closes the ledger book, then waits (at most
        ``RELEASE_WAIT_S``) until the PreLearners' CPUs are free again; once."""
        if not self.running:
            return
        self.running = False
        prelearners = self.totals.close()
        free_before = available_cpus()
        for actor in prelearners:
            ray.kill(actor, no_restart=True)
        kill_actors([self.module_weights] if self.module_weights else [])
        held = len(prelearners) * float(self.kwargs.get("num_cpus", 0))
        wait_for_cpus(free_before + held, timeout_s=RELEASE_WAIT_S)
        self.module_weights = None
