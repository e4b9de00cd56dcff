"""``ExecutionPlan``: how the pipeline runs its epochs, chosen once when ``OfflineData`` is made.

The choice follows from the options and the learner count alone (``DataConfig.num_learners``),
so nothing that happens later (building, splitting, resuming) changes it.
"""

from __future__ import annotations

import enum

from offline_rl.data.source.data_config import DataConfig


class ExecutionPlan(enum.Enum):
    """The three ways the mapped data reaches the learners.

    Examples:
        >>> from offline_rl.settings.offline_data import OfflineDataConfig
        >>> ExecutionPlan.of(DataConfig(OfflineDataConfig()))
        <ExecutionPlan.MAPPED_ONCE: 'mapped once'>
        >>> streamed = OfflineDataConfig(materialize_data=True, materialize_mapped_data=False)
        >>> ExecutionPlan.of(DataConfig(streamed))
        <ExecutionPlan.MANY_EPOCHS_PER_EXECUTION: 'many epochs per execution'>
        >>> ExecutionPlan.of(DataConfig(streamed, num_learners=2))
        <ExecutionPlan.STREAMED_PER_EPOCH: 'streamed per epoch'>
    """

    #: ``materialize_mapped_data=True``: mapped in the first pass and kept in Ray's object
    #: store; later epochs only re-shuffle it.
    MAPPED_ONCE = "mapped once"
    #: Streamed, each epoch a Ray Data execution of its own (a new PreLearner pool each).
    STREAMED_PER_EPOCH = "streamed per epoch"
    #: Streamed from the materialized raw input, one Ray Data execution mapping many epochs with
    #: the same PreLearner actors (``repeated_epochs``).
    MANY_EPOCHS_PER_EXECUTION = "many epochs per execution"

    @classmethod
    def of(cls, config: DataConfig) -> ExecutionPlan:
        """The plan for ``config``: many epochs per execution when the mapped data is streamed,
        the raw input materialized, at most one learner reads it (a ``streaming_split`` shard
        would hold whole epochs of the plan, one Ray Data block spanning several), and
        ``iter_batches_kwargs`` ask for no local shuffle buffer (which would mix the epochs;
        the plan shuffles instead)."""
        options = config.offline_data
        if options.materialize_mapped_data:
            return cls.MAPPED_ONCE
        if (options.materialize_data and config.num_learners <= 1
                and not options.iter_batches_kwargs.get("local_shuffle_buffer_size")):
            return cls.MANY_EPOCHS_PER_EXECUTION
        return cls.STREAMED_PER_EPOCH

    @property
    def repeats_epochs(self) -> bool:
        """Whether one execution streams many epochs (their rows tagged with their epoch)."""
        return self is ExecutionPlan.MANY_EPOCHS_PER_EXECUTION
