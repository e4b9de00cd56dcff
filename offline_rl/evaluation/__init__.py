"""Evaluating policies in environments."""
