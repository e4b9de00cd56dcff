"""The PreLearner actor and its parts: rows and episodes admitted, values checked, episodes
sampled, learner connectors run."""
