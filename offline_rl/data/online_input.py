"""How the data pipeline reads a mixing ``input_`` that names the sampler: its one offline
source, alone."""

from __future__ import annotations

import dataclasses

from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.sources import is_mixed, weighted_sources


def offline_part(section: OfflineDataConfig) -> tuple[OfflineDataConfig, float]:
    """A mixing ``input_`` with one offline source and the sampler, as the data pipeline
    reads it: a copy of ``section`` reading that source alone (with its own read options),
    and the sampler's share of each batch. Any other ``input_`` comes back as it is, with
    share 0.

    Example:
        >>> section, share = offline_part(OfflineDataConfig(input_={"a": 3, "sampler": 1}))
        >>> section.input_, share
        ('a', 0.25)
    """
    if not is_mixed(section.input_):
        return section, 0.0
    sources, sampler_weight = weighted_sources(section.input_)
    (source,) = sources  # input_problem refuses more offline sources on this branch
    return dataclasses.replace(section, input_=source.input_, **source.options), sampler_weight
