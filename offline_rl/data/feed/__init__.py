"""One learner's train batches: epochs cut into exact batches, several sources mixed, online
rows added."""
