"""Real servers only the tests (and benchmarks) use: not shipped in the package."""
