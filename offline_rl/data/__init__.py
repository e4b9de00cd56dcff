"""Reading offline data: input files -> Ray Data -> PreLearner actor pool -> train batches."""
