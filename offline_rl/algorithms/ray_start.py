"""Starting (or joining) Ray for a run, quietly, with other start-up work beside it."""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import ray

from offline_rl.data.ray.ray_data_logs import quiet_ray_data


def start_ray(*, verbose: bool = False, import_meanwhile: Sequence[str] = (),
              num_cpus: int | None = None) -> bool:
    """Connects to the cluster in ``RAY_ADDRESS`` or starts a local Ray instance, while a
    thread imports the modules ``import_meanwhile`` names (``ray.init`` mostly waits for the
    processes it starts, so the two overlap, though on a small machine they share its cores).

    Unless ``verbose``, Ray's own log lines stay off the terminal on a normal run: Ray's driver
    logs errors only, and Ray Data's console none (its log file in the Ray session folder still
    gets everything; errors reach the caller as exceptions). Returns whether this call started
    Ray (and so ``stop()`` should shut it down). ``num_cpus``: the CPUs of a local instance
    started (``None``: the machine's).
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="offline-rl-imports") as pool:
        imported = pool.submit(lambda: [importlib.import_module(name)
                                        for name in import_meanwhile])
        started = _init_ray(verbose, num_cpus)
        imported.result()
    return started


def after_each_ray_init(hook: Callable[[], None]) -> None:
    """Runs ``hook`` after every later ``ray.init()`` in this process (added once), through
    Ray's list of post-init hooks, the one Tune's own registry uses. Ray offers no public hook:
    if a Ray release renames this one, importing offline-rl's Tune support fails here, and
    ``test_tune`` with it."""
    hooks = ray._private.worker._post_init_hooks
    if hook not in hooks:
        hooks.append(hook)


def _init_ray(verbose: bool, num_cpus: int | None) -> bool:
    if ray.is_initialized():
        return False
    options: dict = {"logging_level": logging.INFO if verbose else logging.ERROR}
    if num_cpus is not None:
        options["num_cpus"] = num_cpus
    if not verbose:
        hook = f"{quiet_ray_data.__module__}.{quiet_ray_data.__name__}"
        options["runtime_env"] = {"worker_process_setup_hook": hook}
    if not os.environ.get("RAY_ADDRESS"):
        options["include_dashboard"] = False
    ray.init(**options)
    if not verbose:
        quiet_ray_data()
    return True

