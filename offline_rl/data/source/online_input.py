"""How the data pipeline reads a mixing ``input_``: the sampler's share taken out, and one
offline source read as a plain input (several are ``MixedData``'s to mix)."""

from __future__ import annotations

import dataclasses

from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.sources import is_mixed, weighted_sources


def offline_part(section: OfflineDataConfig) -> tuple[OfflineDataConfig, float]:
    """A mixing ``input_`` as the data pipeline reads it, and the sampler's share of each
    batch (0 without one): with one offline source, a copy of ``section`` reading that source
    alone (with its own read options); with several, ``section`` as it is, for ``MixedData``
    (which leaves the sampler's share out of its mix). Any other ``input_`` comes back as it
    is, with share 0.

    Examples:
        >>> section, share = offline_part(OfflineDataConfig(input_={"a": 3, "sampler": 1}))
        >>> section.input_, share
        ('a', 0.25)
    """
    if not is_mixed(section.input_):
        return section, 0.0
    sources, sampler_weight = weighted_sources(section.input_)
    if len(sources) > 1:
        return section, sampler_weight
    (source,) = sources
    return dataclasses.replace(section, input_=source.input_, **source.options), sampler_weight
