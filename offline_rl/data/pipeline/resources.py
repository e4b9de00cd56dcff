"""Sizing the PreLearner actor pool so it fits the Ray cluster beside the rest of the run (the
CPUs ``ResourcePlan.beside_pipeline`` counts). The pool's ``num_cpus`` left unset takes 1 CPU
per actor where that fits and shrinks where it does not, with one warning saying so; numbers
the user gives are kept, and a pool they cannot fit fails at once with the numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from offline_rl.errors import ConfigError, ResourceError, warn_at_caller
from offline_rl.settings.resource_plan import READ_TASK_CPUS, pool_range

#: Most PreLearner actors started by default (more rarely helps a single learner).
DEFAULT_MAX_ACTORS = 4


def side_by_side_options(map_batches_kwargs: Mapping[str, Any],
                         read_kwargs: Mapping[str, Any], count: int) -> dict[str, Any]:
    """The ``offline_data`` options that let ``count`` streamed pipelines run side by side:
    each one's PreLearner pool (one actor unless ``concurrency`` says otherwise) and read tasks
    take a ``count``-th of the CPUs a pipeline takes alone (an explicit ``num_cpus`` of the
    read tasks is kept).

    Examples:
        >>> options = side_by_side_options({}, {}, 2)
        >>> options["map_batches_kwargs"], options["input_read_method_kwargs"]
        ({'num_cpus': 0.5, 'concurrency': 1}, {'ray_remote_args': {'num_cpus': 0.5}})
    """
    pool = dict(map_batches_kwargs)
    pool["num_cpus"] = float(pool.get("num_cpus", 1)) / count
    pool.setdefault("concurrency", 1)
    read = dict(read_kwargs)
    read["ray_remote_args"] = {"num_cpus": READ_TASK_CPUS / count,
                               **read.get("ray_remote_args", {})}
    return {"map_batches_kwargs": pool, "input_read_method_kwargs": read}


def prelearner_pool_kwargs(requested: Mapping[str, Any], cluster_resources: Mapping[str, float],
                           reserved_cpus: float) -> dict[str, Any]:
    """``map_batches`` keyword arguments for the PreLearner pool.

    ``requested`` is the user's ``map_batches_kwargs``; ``reserved_cpus`` are CPUs the learners
    and the evaluation runners hold. By default each actor takes 1 CPU and as many actors start
    as fit beside one read task (at least 1, at most ``DEFAULT_MAX_ACTORS``). ``concurrency``
    (an int, or a ``(min, max)`` autoscaling range) becomes Ray Data's
    ``compute=ActorPoolStrategy(...)``. A request that cannot fit raises instead of stalling
    forever, as an actor pool waiting for CPUs that never free up would.

    Examples:
        >>> prelearner_pool_kwargs({}, {"CPU": 2}, 0)["compute"].max_size
        1
        >>> prelearner_pool_kwargs({"num_gpus": 1}, {"CPU": 2}, 0)
        Traceback (most recent call last):
        ...
        offline_rl.errors.ResourceError: map_batches_kwargs asks 1 GPU per PreLearner ...
    """
    if "batch_size" in requested:
        raise ConfigError(
            "map_batches_kwargs['batch_size'] is chosen by offline-rl; set "
            "config.offline_data(input_read_batch_size=...) to change how many rows a "
            "PreLearner call receives"
        )
    kwargs = dict(requested)
    total = float(cluster_resources.get("CPU", 0))
    free = total - READ_TASK_CPUS - reserved_cpus
    if "num_cpus" not in kwargs:
        kwargs["num_cpus"] = _auto_prelearner_cpus(kwargs, free)
    _check_gpus(kwargs, cluster_resources)
    if "compute" in kwargs:
        return kwargs
    cpus_per_actor = float(kwargs["num_cpus"])
    if "concurrency" not in kwargs:
        fitting = int(free // cpus_per_actor) if cpus_per_actor else DEFAULT_MAX_ACTORS
        kwargs["concurrency"] = max(1, min(DEFAULT_MAX_ACTORS, fitting))
    minimum, maximum = pool_range(kwargs.pop("concurrency"))
    needed = minimum * cpus_per_actor + READ_TASK_CPUS + reserved_cpus
    if needed > total:
        raise ResourceError(
            f"the PreLearner pool needs {minimum} actor(s) x {cpus_per_actor:g} CPU + "
            f"{READ_TASK_CPUS:g} CPU for reading + {reserved_cpus:g} CPU for learners and env "
            f"runners = {needed:g} CPUs, but the Ray cluster has {total:g}. Lower "
            "map_batches_kwargs['concurrency'] or ['num_cpus'], the learners' or env runners' "
            "(evaluation's, the sampler's) CPUs (num_cpus_per_learner, num_cpus_per_env_runner: "
            "0 shares the CPUs), or add CPUs."
        )
    # Imported here: env runner actors import this module (for its CPU sizing), and Ray Data,
    # which imports pandas, would cost each new runner process 0.45 s.
    from ray.data import ActorPoolStrategy

    kwargs["compute"] = ActorPoolStrategy(min_size=minimum, max_size=maximum)
    return kwargs


def _auto_prelearner_cpus(kwargs: Mapping[str, Any], free: float) -> float:
    """A PreLearner's CPUs when ``map_batches_kwargs`` does not name them: 1, or, where the
    smallest pool of 1-CPU actors does not fit in the ``free`` CPUs, its share of them."""
    if "compute" in kwargs:
        return 1.0
    minimum, _ = pool_range(kwargs.get("concurrency", 1))
    if minimum <= free or free <= 0:
        return 1.0
    share = free / minimum
    warn_at_caller(f"PreLearner actors take {share:g} CPU each (map_batches_kwargs['num_cpus']"
                   f" not set): {minimum} x 1 CPU do not fit in the {free:g} CPU(s) left beside "
                   "the read task, the learners and the env runners. Set "
                   "map_batches_kwargs['num_cpus'] to choose.")
    return share


def _check_gpus(kwargs: Mapping[str, Any], cluster_resources: Mapping[str, float]) -> None:
    """Refuses PreLearner GPUs the cluster does not have (an actor pool would wait forever)."""
    gpus = float(kwargs.get("num_gpus", 0) or 0)
    minimum, _ = pool_range(kwargs.get("concurrency", 1))
    available = float(cluster_resources.get("GPU", 0))
    if gpus and minimum * gpus > available:
        raise ResourceError(
            f"map_batches_kwargs asks {gpus:g} GPU per PreLearner for at least {minimum} "
            f"actor(s), but the Ray cluster has {available:g} GPU(s). Remove num_gpus from "
            "map_batches_kwargs (PreLearners need no GPU unless a connector piece runs the "
            "module there), or add GPU nodes to the cluster.")
