"""Ray Data lifecycle workarounds that know nothing of RL: stopping executions and actors,
keeping Ray Data's logs quiet."""
