"""Session fixtures shared by the tests and the docstring examples (loaded with ``-p`` in
pyproject.toml, so that doctests under offline_rl/ and connectors/ see them too): one local Ray
instance (one per pytest-xdist worker) and a small recorded CartPole dataset, which examples know
as ``cartpole_data``."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem

#: The shared instance: 2 CPUs, like CI.
RAY_OPTIONS = {"num_cpus": 2, "include_dashboard": False}
#: Seconds a test module's Ray CPUs may take to be given back after its last test.
CPU_RELEASE_TIMEOUT_S = 30
#: Ray's log monitor lists its session's log folder every 0.1 s while it holds fewer than this
#: many files, else every 0.5 s. A suite's session gathers a thousand worker logs: listing them
#: ten times a second took 14 % of a core (6 % at 0.5 s), 6 % of the suite's CPU in all.
#: Worker output still reaches the driver, at most half a second later.
LOG_MONITOR_MANY_FILES = "0"


def pytest_configure(config):
    """Under pytest-xdist (``make test``: ``-n 2``), the workers share the machine's cores: each
    worker's torch (and that of the commands it runs) takes its share of them as threads, as Ray
    gives its own workers ``OMP_NUM_THREADS``, unless ``OMP_NUM_THREADS`` is set already. Two
    workers with two threads each on 2 cores spend CPU on torch's threads waiting for one
    another that the other worker's tests need. The Ray instances the tests start list their
    log folders less often (``LOG_MONITOR_MANY_FILES``)."""
    os.environ.setdefault("RAY_LOG_MONITOR_MANY_FILES_THRESHOLD", LOG_MONITOR_MANY_FILES)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")  # Linux
                 else os.cpu_count() or 1)
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, cores // workers)))


@pytest.fixture(scope="session")
def ray_session():
    """A real local Ray instance, shared by every test that needs one. Ray's notices of dead
    workers (``(raylet) A worker died ...``, printed by a driver thread whenever they arrive)
    go to the process's own stderr (pytest still shows them with a failing test's output):
    printed to ``sys.stdout``, one arriving late from an earlier test would land in the output
    a docstring example, or a command's last line, is compared with."""
    import ray
    import ray._private.worker as ray_worker

    ray.init(**RAY_OPTIONS)  # the workers' own output keeps Ray's handler
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray_worker, "print_to_stdstream", lambda data, ignore_prefix:
                      ray_worker.print_worker_logs(data, sys.__stderr__, ignore_prefix))
        yield
    ray.shutdown()


def cpus_held_after(timeout_s: float) -> float:
    """The shared instance's CPUs still held after waiting (``wait_for_cpus``) at most
    ``timeout_s`` for them to come back: Ray's view of free resources trails finished tasks and
    killed actors by about a tenth of a second (its raylets report every 100 ms)."""
    import ray

    from offline_rl.data.ray.actors import wait_for_cpus
    from offline_rl.placement import available_cpus

    total = ray.cluster_resources().get("CPU", 0)
    wait_for_cpus(total, timeout_s=timeout_s)
    return total - available_cpus()


@pytest.fixture(scope="module", autouse=True)
def _ray_cpus_given_back(request):
    """After each module, every CPU of the shared instance is free again. Where one stays held
    (Ray 2.60 can keep a worker leased for good when an actor is killed while it is being
    created), every later test would wait for it until its timeout: the instance is restarted
    instead, with a warning naming the module."""
    yield
    import ray

    if ray.is_initialized() and (held := cpus_held_after(CPU_RELEASE_TIMEOUT_S)) > 0:
        warnings.warn(f"{request.module.__name__} left {held:g} Ray CPU(s) held; "
                      "restarting the shared Ray instance", stacklevel=1)
        ray.shutdown()
        ray.init(**RAY_OPTIONS)


@pytest.fixture(scope="session")
def cartpole_data(tmp_path_factory) -> Path:
    """40 episodes of the CartPole expert tier (5% random actions, ~20k steps), tabular."""
    from offline_rl.datasets import make_dataset

    path = tmp_path_factory.mktemp("datasets") / "cartpole-expert"
    make_dataset("CartPole-v1", path, tier="expert", episodes=40, seed=0, progress=False)
    return path


@pytest.fixture(autouse=True)
def _doctest_environment(request, doctest_namespace):
    """Docstring examples run against the shared Ray instance and dataset."""
    if isinstance(request.node, DoctestItem):
        request.getfixturevalue("ray_session")
        doctest_namespace["cartpole_data"] = request.getfixturevalue("cartpole_data")
