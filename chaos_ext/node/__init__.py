"""Node faults: drains that honour PodDisruptionBudgets, and node/pod/HPA probes."""
