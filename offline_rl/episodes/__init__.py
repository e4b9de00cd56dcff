"""Episodes: ``SingleAgentEpisode``, its lookback buffers, the replay buffer, and episodes as
flat transition columns."""
