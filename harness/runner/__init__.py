"""Matrix expansion, the worker pool, the result cache and sharding."""
