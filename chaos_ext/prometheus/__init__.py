"""Prometheus-backed steady state: typed probes, the probe catalog, abort conditions."""
