"""Calls to an ``OfflineData``'s ``sample()``, which a subclass may override with RLlib's
signature (``num_samples``, ``return_iterator``, ``num_shards``; ``overrides_sample`` says),
and the learners' feeds made of them."""

from __future__ import annotations

from typing import Any

from offline_rl.data.feed.learner_feed import LearnerFeed, SampleFeed, ShardFeed
from offline_rl.errors import ConfigError

#: The keywords of RLlib's ``OfflineData.sample``, all an override is sure to take.
RLLIB_SAMPLE_KEYWORDS = ("num_samples", "return_iterator", "num_shards")


def call_sample(data: Any, **kwargs: Any) -> Any:
    """``data.sample(**kwargs)``; an overridden ``sample`` gets only RLlib's keywords."""
    if data.overrides_sample:
        kwargs = {name: value for name, value in kwargs.items() if name in RLLIB_SAMPLE_KEYWORDS}
    return data.sample(**kwargs)


def check_epoch_ends(data: Any) -> None:
    """One epoch per iteration (``dataset_num_iters_per_learner=None``) needs offline-rl's
    ``sample()``, which says where an epoch ends."""
    if data.config.offline_data.dataset_num_iters_per_learner is None and data.overrides_sample:
        raise ConfigError(
            f"{type(data).__name__} overrides sample(), which cannot say where an epoch "
            "ends, so a training iteration cannot run one epoch; set "
            "config.offline_data(dataset_num_iters_per_learner=<updates per iteration>)")


def sample_feeds(data: Any, num_learners: int, locality_hints: list[str] | None
                 ) -> list[LearnerFeed]:
    """``OfflineData.feeds`` of an override of ``sample()`` (for ``0`` learners a
    ``SampleFeed`` of it) and of remote learners:
    ``num_learners`` ``ShardFeed``s of the shards ``sample(return_iterator=True)`` gives."""
    if num_learners == 0:
        check_epoch_ends(data)
        return [SampleFeed(data)]
    if num_learners > 1 and data.plan.repeats_epochs:
        raise ConfigError(
            f"this OfflineData's plan ({data.plan.value}) was chosen for one learner, and "
            f"{num_learners} learners cannot share its epochs; make it from a config with "
            f"learners(num_learners={num_learners})")
    shards = call_sample(data, return_iterator=True, num_shards=num_learners,
                         locality_hints=locality_hints)
    return [ShardFeed(shard, data.batching()) for shard in shards]
