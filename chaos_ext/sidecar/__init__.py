"""Sidecar faults: injector template changes, drift detection and controlled rollouts."""
