"""The shared Prometheus client: every domain that reads Prometheus uses these modules.

* :mod:`.client`: settings from configuration/secrets (URL, auth, TLS,
  timeout), instant and range queries with typed errors;
* :mod:`.promql`: pure PromQL builders (label matchers, histogram quantile);
* :mod:`.results`: pure evaluation of Prometheus answers (values, windows,
  SLO fractions, conditions, durations);
* :mod:`.rules`, :mod:`.alertstate`, :mod:`.alertwatch`, :mod:`.alertsources`,
  :mod:`.replay`: alerting rules (files, PrometheusRule manifests, selectors),
  Prometheus's pending/firing state machine and its replay, alert selection,
  and the alerts Prometheus and Alertmanager list.

It is plumbing, below the fault domains: ``chaos_ext.prometheus`` (steady
state, catalog, the ``alerts_quiet`` probe), ``chaos_ext.envoy`` (overload
state) and the stop conditions (``chaos_ext.controls.stop_conditions``) build
on it without importing each other.
"""
