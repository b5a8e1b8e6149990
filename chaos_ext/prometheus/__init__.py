"""Prometheus-backed steady state: typed probes, the probe catalog, alerts as probes."""
