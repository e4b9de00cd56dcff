"""The policy network: model configs and specs (no torch), the torch modules and their
action distributions."""
