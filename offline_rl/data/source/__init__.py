"""Where rows come from: listing and checking the input files, reading them into a Ray Dataset,
custom and old-stack readers."""
