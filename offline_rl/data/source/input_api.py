"""RLlib's old-stack custom input API: ``InputReader`` (``next()`` returns a ``SampleBatch``),
``ShuffledInput`` (a sliding shuffle buffer over a reader's batches) and ``register_input``
(a creator ``(IOContext) -> InputReader`` under a name, for ``input="name"``).

Names are looked up only among those this process registered: nothing named in a config or a
file is ever imported. A registered name is resolved to its creator in the driver, and the
creator (pickled with cloudpickle) travels to the read tasks.

Examples:
    >>> from offline_rl.data.source.io_context import IOContext
    >>> class Counting(InputReader):
    ...     def __init__(self, ioctx):
    ...         self.t = 0
    ...     def next(self):
    ...         self.t += 1
    ...         return {"t": [self.t]}
    >>> register_input("counting", Counting)
    >>> reader = ShuffledInput(input_creator("counting")(IOContext()), n=3, seed=0)
    >>> sorted(reader.next()["t"][0] for _ in range(3))
    [1, 2, 3]
    >>> "counting" in registered_inputs()
    True
"""

from __future__ import annotations

import abc
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from offline_rl.errors import ConfigError

#: A custom input: a function of an ``IOContext`` returning an ``InputReader``.
InputCreator = Callable[[Any], "InputReader"]
#: A string that reads as a name rather than a path (no separator, dot, glob or scheme).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_REGISTRY: dict[str, InputCreator] = {}


class InputReader(abc.ABC):
    """Reads experience batch by batch (RLlib's ``ray.rllib.offline.InputReader``)."""

    @abc.abstractmethod
    def next(self) -> Mapping[str, Any]:
        """The next batch: a ``SampleBatch`` (or any dict of equal-length columns with
        ``obs``, ``new_obs``, ``actions``, ``rewards`` and ``terminateds`` or ``dones``).
        Raise ``StopIteration`` when there are no more."""

    def tf_input_ops(self, queue_size: int = 1) -> dict[str, Any]:
        """RLlib's TensorFlow queue over ``next()``: offline-rl is torch only, so this refuses
        with ``ConfigError``; a supervised loss takes ``next()``'s numpy columns, as tensors
        (``torch.as_tensor``)."""
        raise ConfigError(f"{type(self).__name__}.tf_input_ops(): offline-rl is torch only and "
                          "builds no TensorFlow ops; call next() for a batch of numpy columns "
                          "and torch.as_tensor() them in your loss")


class ShuffledInput(InputReader):
    """Batches of ``child`` in random order, through a sliding buffer of ``n`` batches
    (``n`` <= 1: passed through). The buffer is filled before the first batch is returned;
    when ``child`` ends (``StopIteration``), the batches left are returned in random order.
    ``seed`` seeds the order (offline-rl's addition)."""

    def __init__(self, child: InputReader, n: int = 0, *, seed: int | None = None) -> None:
        self.child = child
        self.n = n
        self.buffer: list[Mapping[str, Any]] = []
        self._random = random.Random(seed)
        self._child_ended = False

    def next(self) -> Mapping[str, Any]:
        if self.n <= 1:
            return self.child.next()
        while not self._child_ended and len(self.buffer) < self.n:
            self._take_from_child()
        if not self.buffer:
            raise StopIteration
        index = self._random.randrange(len(self.buffer))
        batch = self.buffer[index]
        self.buffer[index] = self.buffer[-1]
        self.buffer.pop()
        return batch

    def _take_from_child(self) -> None:
        try:
            self.buffer.append(self.child.next())
        except StopIteration:
            self._child_ended = True


def register_input(name: str, creator: InputCreator) -> None:
    """Registers ``creator`` (``(IOContext) -> InputReader``) as the input ``name``, for
    ``config.offline_data(input_=name)`` or the old stack's ``{"input": name}`` (RLlib's
    ``ray.tune.registry.register_input``); registering a name again replaces its creator."""
    if not isinstance(name, str) or not name or not callable(creator):
        raise ConfigError(f"register_input({name!r}, {creator!r}): give a name (a str) and a "
                          "callable (IOContext) -> InputReader")
    _REGISTRY[name] = creator


def registered_inputs() -> list[str]:
    """The names ``register_input`` registered in this process, sorted."""
    return sorted(_REGISTRY)


def input_creator(input_: Any) -> InputCreator | None:
    """The custom input ``input_`` names: a callable itself, or a registered name's creator;
    ``None`` for paths (and anything else)."""
    if callable(input_):
        return input_
    return _REGISTRY.get(input_) if isinstance(input_, str) else None


def looks_like_input_name(value: Any) -> bool:
    """Whether ``value`` reads as an input's name (``"custom_input"``) rather than a path:
    letters, digits, ``_`` and ``-`` only."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def unregistered_input_error(name: str) -> ConfigError:
    """The error for an input name no ``register_input`` call registered."""
    known = registered_inputs()
    return ConfigError(
        f"input {name!r} is neither a registered input nor an existing path; registered "
        f"inputs: {known or 'none'}. Call offline_rl.register_input({name!r}, creator) in this "
        "process first, or give the path of the recorded data")
