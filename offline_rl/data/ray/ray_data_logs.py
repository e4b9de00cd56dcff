"""Ray Data's console lines, kept off the terminal of a normal run."""

from __future__ import annotations

import logging


def quiet_ray_data() -> None:
    """Keeps Ray Data's console lines (progress notes, "execution finished") off the terminal:
    its log file in the Ray session folder still gets them, and errors reach the caller as
    exceptions. Runs in the driver and, as the job's worker process setup hook, in each Ray
    worker, from which Ray would forward them to the driver's terminal (a ``SplitCoordinator``
    actor's with remote learners, say).

    Examples:
        >>> quiet_ray_data()
        >>> handlers = logging.getLogger("ray.data").handlers
        >>> {logging.getLevelName(handler.level) for handler in handlers
        ...  if isinstance(handler, logging.StreamHandler)
        ...  and not isinstance(handler, logging.FileHandler)}
        {'CRITICAL'}
    """
    import ray.data  # noqa: F401  (sets up Ray Data's loggers, which this then quiets)

    for handler in logging.getLogger("ray.data").handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(
                handler, logging.FileHandler):  # the console; the session log file stays
            handler.setLevel(logging.CRITICAL)
