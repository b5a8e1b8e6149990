"""The shared Prometheus client: every domain that reads Prometheus uses these modules.

* :mod:`.client`: settings from configuration/secrets (URL, auth, TLS,
  timeout), instant and range queries with typed errors;
* :mod:`.promql`: pure PromQL builders (label matchers, histogram quantile);
* :mod:`.results`: pure evaluation of Prometheus answers (values, windows,
  SLO fractions, conditions, durations).

It is plumbing, below the fault domains: ``chaos_ext.prometheus`` (steady
state, catalog, abort plans, alerts) and ``chaos_ext.envoy`` (overload state)
both build on it without importing each other.
"""
