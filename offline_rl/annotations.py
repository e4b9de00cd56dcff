"""``override``: RLlib's decorator marking a method that overrides its parent's.

Examples:
    >>> class Base:
    ...     def step(self): return 1
    >>> class Child(Base):
    ...     @override(Base)
    ...     def step(self): return 2
    >>> Child().step()
    2
    >>> class Wrong(Base):
    ...     @override(Base)
    ...     def stepp(self): return 2
    Traceback (most recent call last):
    ...
    TypeError: stepp is not a method of Base; @override(Base) marks a method that overrides one
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

Method = TypeVar("Method", bound=Callable[..., Any])


def override(parent_class: type) -> Callable[[Method], Method]:
    """A decorator that checks that ``parent_class`` has the decorated method (a function,
    or a ``staticmethod``/``classmethod`` of one) and returns it unchanged; a ``TypeError``
    names it when ``parent_class`` has no such method."""

    def check(method: Method) -> Method:
        name = getattr(method, "__func__", method).__name__
        if not callable(getattr(parent_class, name, None)):
            raise TypeError(f"{name} is not a method of {parent_class.__name__}; "
                            f"@override({parent_class.__name__}) marks a method that overrides one")
        return method

    return check
