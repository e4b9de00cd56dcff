"""On-disk formats: tabular rows, msgpack episodes and legacy SampleBatch JSON, decoded into
episodes and columns with one set of value checks."""
