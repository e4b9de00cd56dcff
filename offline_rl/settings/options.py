"""Options declared once: each config section is a dataclass whose fields carry their type,
default, documentation (the ``#:`` comment above the field) and check, side by side.

Examples:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Example(Section):
    ...     #: Workers to start.
    ...     workers: int = option(1, AN_INT_AT_LEAST_1)
    ...     #: Their names.
    ...     names: list[str] = option(["a"])
    >>> Example(workers=0).problems()
    [('workers', 'must be an int >= 1, got 0')]
    >>> Example().names is Example().names  # each instance gets its own copy of the default
    False
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class _NotProvided:
    """Marks a builder argument the caller did not pass (``None`` is a meaningful value)."""

    def __repr__(self) -> str:
        return "NotProvided"


NotProvided: Any = _NotProvided()

#: A check: what is wrong with a value (``"must be ..., got ..."``), or ``None``.
Check = Callable[[Any], "str | None"]


def option(default: Any, check: Check | None = None) -> Any:
    """A dataclass field with its default (a fresh deep copy per instance for a list or dict)
    and its ``check``, which ``Section.problems`` runs."""
    metadata = {"check": check} if check else {}
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default),
                                 metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Rule:
    """A check made of what a value must be and a test of it.

    Examples:
        >>> AN_INT_AT_LEAST_0(-1)
        'must be an int >= 0, got -1'
        >>> optional(AN_INT_AT_LEAST_0)("x")
        "must be None or an int >= 0, got 'x'"
    """

    what: str
    holds: Callable[[Any], bool]

    def __call__(self, value: Any) -> str | None:
        return None if self.holds(value) else f"must be {self.what}, got {value!r}"


def is_finite_number(value: Any) -> bool:
    """An int or float (not a bool) that is neither NaN nor infinite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_int_at_least(value: Any, least: int) -> bool:
    """An int (not a bool) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def optional(rule: Rule, what: str = "None") -> Rule:
    """``rule``, or ``None`` (``what`` says what ``None`` means)."""
    return Rule(f"{what} or {rule.what}", lambda value: value is None or rule.holds(value))


def one_of(*values: Any) -> Rule:
    """One of ``values``."""
    return Rule(f"one of {values}", lambda value: value in values)


A_BOOL = Rule("True or False", lambda value: isinstance(value, bool))
AN_INT_AT_LEAST_0 = Rule("an int >= 0", lambda value: is_int_at_least(value, 0))
AN_INT_AT_LEAST_1 = Rule("an int >= 1", lambda value: is_int_at_least(value, 1))
A_NUMBER_AT_LEAST_0 = Rule("a number >= 0", lambda value: is_finite_number(value) and value >= 0)
AUTO_OR_A_NUMBER_AT_LEAST_0 = Rule(
    "'auto' or a number >= 0", lambda value: value == "auto" or A_NUMBER_AT_LEAST_0.holds(value))
A_NUMBER_ABOVE_0 = Rule("a number > 0", lambda value: is_finite_number(value) and value > 0)
KEYWORD_ARGUMENTS = Rule("a dict of keyword arguments", lambda value: isinstance(value, dict))


def finite_number(what: str, holds: Callable[[float], bool]) -> Rule:
    """A finite number for which ``holds`` is true (``what`` says which)."""
    return Rule(f"a finite number {what}",
                lambda value: is_finite_number(value) and holds(value))


class Section:
    """Base of the config sections (dataclasses of ``option`` fields)."""

    def problems(self) -> list[tuple[str, str]]:
        """``(field, problem)`` for each field whose check fails, then ``joint_problems``."""
        found = []
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            check = field.metadata.get("check")
            problem = check(getattr(self, field.name)) if check else None
            if problem:
                found.append((field.name, problem))
        return found + self.joint_problems()

    def joint_problems(self) -> list[tuple[str, str]]:
        """Problems of several fields together (none by default)."""
        return []

    @classmethod
    def option_check(cls, name: str) -> Check | None:
        """The check of option ``name`` (``None``: it has none, or is no option here)."""
        field = next((field for field in dataclasses.fields(cls)  # type: ignore[arg-type]
                      if field.name == name), None)
        return None if field is None else field.metadata.get("check")

    @classmethod
    def option_names(cls) -> list[str]:
        """The section's fields, in declaration order."""
        return [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """``{field: value}`` (the values themselves, not copies)."""
        return {name: getattr(self, name) for name in self.option_names()}
