"""Where a run's Ray work goes: anywhere in the cluster, or, when the run is a Ray Tune trial,
inside the trial's placement group.

A trial reserves everything it will start (``offline_rl.algorithms.trainable`` asks Tune for a
bundle for its own process, then one bundle for the rest), so trials sharing a cluster never
take each other's CPUs: Tune starts a trial only once all of its resources are free. Inside the
trial, actors Ray starts with default scheduling land in the placement group by themselves;
work that names its own scheduling (Ray Data's tasks and actors, the learners) is sent there by
``scheduling_options`` and ``keep_ray_data_in_placement_group``.

Examples:
    >>> usable_resources()["CPU"] >= 1, scheduling_options()   # the driver: the whole cluster
    (True, {})
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, get_current_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from offline_rl.errors import ResourceError


def current_placement_group() -> PlacementGroup | None:
    """The placement group this process runs in and its children are placed in (a Tune
    trial's), or ``None``."""
    return get_current_placement_group() if ray.is_initialized() else None


def usable_resources() -> dict[str, float]:
    """The resources this run may use: the cluster's or, in a trial, those of its placement
    group's bundles after the first (which the trial's own process holds)."""
    group = current_placement_group()
    if group is None:
        return ray.cluster_resources()
    usable: dict[str, float] = {}
    for bundle in group.bundle_specs[1:]:
        for name, amount in bundle.items():
            usable[name] = usable.get(name, 0.0) + amount
    return usable


def check_fits(what: str, needed: dict[str, float], fix: str) -> None:
    """Raises ``ResourceError`` when ``needed`` exceeds ``usable_resources()``: Ray would
    otherwise wait forever for actors it can never place.

    Examples:
        >>> check_fits("9 env runners", {"CPU": 9}, "lower num_env_runners")
        Traceback (most recent call last):
        ...
        offline_rl.errors.ResourceError: 9 env runners need 9 CPU, but the Ray cluster has 2; ...
    """
    usable = usable_resources()
    for name, amount in needed.items():
        if amount > usable.get(name, 0):
            where = "this Tune trial reserved" if current_placement_group() else \
                "the Ray cluster has"
            raise ResourceError(f"{what} need {amount:g} {name}, but {where} "
                                f"{usable.get(name, 0):g}; {fix}")


def available_cpus() -> float:
    """CPUs free right now for this run's work: in the cluster, or in the trial's group."""
    group = current_placement_group()
    name = "CPU" if group is None else f"CPU_group_{group.id.hex()}"
    return ray.available_resources().get(name, 0.0)


def scheduling_options() -> dict[str, Any]:
    """Ray ``.options()`` that keep an actor or task in the trial's placement group (any
    bundle with room); none outside a trial."""
    group = current_placement_group()
    if group is None:
        return {}
    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
        group, placement_group_capture_child_tasks=True)}


def keep_ray_data_in_placement_group() -> None:
    """In a trial, makes this process's Ray Data schedule every task and actor in the trial's
    placement group: Ray Data otherwise spreads them over the cluster, where the CPUs reserved
    for the trial are not free, and would wait forever. Ray Data's per-operator
    ``ray_remote_args`` cannot reach all of its tasks (file listing, for one), so this sets the
    process's ``DataContext`` defaults, which Ray 2.x marks deprecated (warnings silenced).

    Only the default strategy is the group's: its "large arguments" one stays Ray's, and no
    task's arguments count as large, so every task still goes to the group. With both set to
    the group, Ray Data 2.60 budgets the object store memory the group's bundles hold, which
    is none (a bundle holding some crashes Ray's raylet when the group is removed): every
    block then waited for Ray Data's idle detector, one per 10 s, and a trial's first
    ``train()`` took 22 s instead of 2."""
    options = scheduling_options()
    if not options:
        return
    from ray.data import DataContext

    context = DataContext.get_current()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        context.scheduling_strategy = options["scheduling_strategy"]
        context.large_args_threshold = sys.maxsize
