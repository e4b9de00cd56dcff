"""``OfflineData`` and its mix: the pipeline from files to learners, repeated epochs, statistics,
sizing."""
