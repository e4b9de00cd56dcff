"""RLlib's two forms of a PreLearner's map functions (``_map_to_episodes``,
``_map_sample_batch_to_episode``): the static one of Ray 2.10-2.4x and Ray 2.60's method."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np


class map_function:
    """RLlib's two forms of a PreLearner's map functions: the static one of Ray 2.10-2.4x,
    ``OfflinePreLearner._map_to_episodes(is_multi_agent, batch, ...)``, and Ray 2.60's method,
    ``prelearner._map_to_episodes(batch, ..., is_multi_agent=...)``. The function gets the class
    or the instance first, then ``is_multi_agent`` (``False`` unless given) and ``batch``."""

    def __init__(self, function: Callable[..., Any]):
        self.function = function
        self.__doc__ = function.__doc__

    def __get__(self, instance: Any, owner: type) -> Callable[..., Any]:
        function = self.function

        def mapped(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], bool | np.bool_):
                kwargs["is_multi_agent"], args = bool(args[0]), args[1:]
            if args:
                kwargs["batch"], args = args[0], args[1:]
            is_multi_agent = kwargs.pop("is_multi_agent", False)
            return function(owner if instance is None else instance, is_multi_agent,
                            kwargs.pop("batch"), *args, **kwargs)

        mapped.__doc__ = function.__doc__
        return mapped


def takes_batch_first(prelearner_class: type) -> bool:
    """Whether ``prelearner_class`` overrides ``_map_to_episodes`` as Ray 2.60's method
    (``self, batch, ...``) rather than the older static form (``is_multi_agent, batch, ...``)."""
    method = inspect.getattr_static(prelearner_class, "_map_to_episodes")
    if isinstance(method, map_function | staticmethod | classmethod):
        return False
    parameters = list(inspect.signature(method).parameters)
    return len(parameters) > 1 and parameters[1] != "is_multi_agent"
