"""A custom PreLearner for tests (imported by Ray Data workers by its module path)."""

from __future__ import annotations

from offline_rl import DEFAULT_MODULE_ID, OfflinePreLearner, flatten_dict, unflatten_dict


class NegatedRewards(OfflinePreLearner):
    """Maps rows as usual, then negates the rewards."""

    def __call__(self, batch):
        columns = unflatten_dict(super().__call__(batch))[DEFAULT_MODULE_ID]
        columns["rewards"] = -columns["rewards"]
        return flatten_dict({DEFAULT_MODULE_ID: columns})


class DiesOnce(OfflinePreLearner):
    """Maps rows as usual, but the first actor to reach its second call exits its process
    (once per run, arbitrated by the test's ``Log`` actor)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def __call__(self, batch):
        import os

        import ray

        from tests.learners import LOG_NAME

        self.calls += 1
        if self.calls == 2 and ray.get(ray.get_actor(LOG_NAME).first_call.remote("died")):
            os._exit(1)
        return super().__call__(batch)


class ReportsImports(OfflinePreLearner):
    """Maps rows as usual and adds, per row, whether torch and the algorithms were imported in
    this actor's process (column ``heavy_imports``)."""

    def __call__(self, batch):
        import sys

        import numpy as np

        columns = unflatten_dict(super().__call__(batch))[DEFAULT_MODULE_ID]
        heavy = "torch" in sys.modules or "offline_rl.algorithms.algorithm" in sys.modules
        columns["heavy_imports"] = np.full(len(columns["obs"]), heavy)
        return columns


class WideRewards(OfflinePreLearner):
    """Returns rewards of shape (batch, 1): the learners must refuse them."""

    def __call__(self, batch):
        columns = unflatten_dict(super().__call__(batch))[DEFAULT_MODULE_ID]
        return {**columns, "rewards": columns["rewards"][:, None]}


class Stalls(OfflinePreLearner):
    """In a Ray Data actor, touches the file ``started`` on its first call, then never
    returns from it: a materialization that runs until it is stopped. (Called in the driver,
    which checks the first rows, it maps them as usual.)"""

    def __init__(self, *args, started: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.started = started

    def __call__(self, batch):
        import pathlib
        import threading

        import ray

        if ray.get_runtime_context().get_actor_id() is None:
            return super().__call__(batch)
        pathlib.Path(self.started).touch()
        threading.Event().wait()


class StartsSlowly(OfflinePreLearner):
    """In a Ray Data actor, touches the file ``started`` while it is built, then never finishes
    being built: an execution whose PreLearner actors are starting until it is stopped.
    (Built in the driver, which checks the first rows, it maps them as usual.)"""

    def __init__(self, *args, started: str, **kwargs):
        import pathlib
        import threading

        import ray

        super().__init__(*args, **kwargs)
        if ray.get_runtime_context().get_actor_id() is not None:
            pathlib.Path(started).touch()
            threading.Event().wait()
