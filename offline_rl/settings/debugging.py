"""The ``debugging`` section."""

from __future__ import annotations

from dataclasses import dataclass

from offline_rl.settings.options import AN_INT_AT_LEAST_0, Section, option, optional


@dataclass
class DebuggingConfig(Section):
    """See ``AlgorithmConfig.debugging``.

    Examples:
        >>> DebuggingConfig(seed="zero").problems()
        [('seed', "must be None or an int >= 0, got 'zero'")]
    """

    #: Seeds torch, data shuffling and evaluation episodes (``None``: not reproducible).
    seed: int | None = option(None, optional(AN_INT_AT_LEAST_0))
