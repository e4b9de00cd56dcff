"""Modules, distributions and learners (torch lives here, imported on demand)."""
