"""Alerts that can never fire against this Prometheus, found before the run.

An alerting rule whose expression needs series that Prometheus does not have
(a recording rule it does not evaluate, such as kube-prometheus'
``apiserver_request:burnrate1h`` behind ``KubeAPIErrorBudgetBurn``, or a
metric nobody exports) never returns anything: as a stop condition it
protects nothing, and the run would say "held". :func:`unfirable` names each
such alert and what it lacks; :func:`unfirable_in` asks Prometheus.
"""

from __future__ import annotations

from collections.abc import Sequence

from chaos_ext._core.prometheus_api.client import PrometheusClient
from chaos_ext._core.prometheus_api.promql import missing_metrics
from chaos_ext._core.prometheus_api.rules import AlertRule

__all__ = ["unfirable", "unfirable_in"]


def unfirable(rules: Sequence[AlertRule], present: set[str], recorded: set[str]) -> list[str]:
    """One line per alert (rules of one name together) that cannot fire: the recording
    rules and metrics it lacks."""
    missing: dict[str, set[str]] = {}
    for rule in rules:
        lacking = missing_metrics(rule.expr, present)
        if lacking:
            missing.setdefault(rule.name, set()).update(lacking)
    return [_line(name, lacking, recorded) for name, lacking in missing.items()]


def _line(name: str, missing: set[str], recorded: set[str]) -> str:
    records = sorted(n for n in missing if ":" in n and n not in recorded)
    metrics = sorted(missing - set(records))
    needs = []
    if records:
        needs.append(
            f"recording rule(s) {', '.join(records)}, which this Prometheus does not evaluate"
        )
    if metrics:
        needs.append(f"series {', '.join(metrics)}, which this Prometheus does not have")
    return f"alert {name} can never fire here: it needs {' and '.join(needs)}"


def unfirable_in(prom: PrometheusClient, rules: Sequence[AlertRule]) -> list[str]:
    """:func:`unfirable` against what ``prom`` holds now."""
    if not rules:
        return []
    return unfirable(rules, prom.metric_names(), prom.recorded_names())
