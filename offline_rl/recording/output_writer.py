"""RLlib's old-stack custom output API: ``OutputWriter`` (``write(sample_batch)``) and
``NoopOutput``. With ``config.offline_data(output=creator)``, a creator ``(IOContext) ->
OutputWriter``, each recording actor builds its writer with
``creator(IOContext(worker_index=i, config=...))`` and hands it every episode it records, as
a ``SampleBatch`` (``episode_to_sample_batch``), instead of writing files.

Examples:
    >>> class Counting(OutputWriter):
    ...     def __init__(self):
    ...         self.rows = 0
    ...     def write(self, sample_batch):
    ...         self.rows += sample_batch.count
    >>> writer = Counting()
    >>> writer.write(SampleBatch({"rewards": [1.0, 1.0, 1.0]}))
    >>> writer.rows, NoopOutput().write(SampleBatch()) is None
    (3, True)
"""

from __future__ import annotations

import abc

from offline_rl.recording.sample_batch_builder import SampleBatch


class OutputWriter(abc.ABC):
    """Saves batches of experience (RLlib's ``ray.rllib.offline.OutputWriter``)."""

    @abc.abstractmethod
    def write(self, sample_batch: SampleBatch) -> None:
        """Saves one batch (here: one recorded episode's steps)."""


class NoopOutput(OutputWriter):
    """Drops every batch (RLlib's ``NoopOutput``)."""

    def write(self, sample_batch: SampleBatch) -> None:
        """Does nothing."""
