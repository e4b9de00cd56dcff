"""RLlib's flat attribute access (``config.lr``, ``config.input_``) over a config made of
sections: a name that is a field of one of the sections reads and writes that field.

offline-rl's own code names the section (``config.training.lr`` on a ``DataConfig``,
``config.sections.training.lr`` on an ``AlgorithmConfig``), so that an option's readers are
found by its references; the flat names serve users and their custom PreLearners and Learners,
written against RLlib.

Examples:
    >>> from dataclasses import dataclass
    >>> from offline_rl.settings.training import TrainingConfig
    >>> @dataclass
    ... class Holder(FlatAccess):
    ...     training: TrainingConfig
    >>> holder = Holder(TrainingConfig())
    >>> holder.lr = 0.5
    >>> holder.training.lr, holder.lr
    (0.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from offline_rl.settings.options import Section


class FlatAccess:
    """Reads and writes the fields of the ``Section`` objects this object holds by their
    own names (the object's own attributes and dataclass fields come first); the sections'
    field names must not collide."""

    def _sections(self) -> Iterator[Section]:
        for value in vars(self).values():
            if isinstance(value, Section):
                yield value
            elif isinstance(value, SectionGroup):
                yield from value

    def _owner(self, name: str) -> Section | None:
        return next((section for section in self._sections()
                     if name in section.option_names()), None)

    def __getattr__(self, name: str) -> Any:
        # Only called for names not found normally; private names (also while unpickling,
        # before the sections exist) are never flat options.
        owner = None if name.startswith("_") else self._owner(name)
        if owner is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(owner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        own = name.startswith("_") or name in vars(self) or name in getattr(
            type(self), "__dataclass_fields__", ())
        owner = None if own else self._owner(name)
        object.__setattr__(owner if owner is not None else self, name, value)


class SectionGroup:
    """A named set of sections (``AlgorithmConfig.sections``): iterating yields them."""

    def __iter__(self) -> Iterator[Section]:
        return iter(value for value in vars(self).values() if isinstance(value, Section))
