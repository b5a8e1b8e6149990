"""Prometheus probes that return numbers and verdicts, not raw JSON.

Pair them with Chaos Toolkit tolerances directly: a float probe with
``{"type": "range", "range": [0, 0.01]}``, a bool probe with ``true``.
Connection settings: ``prometheus_url`` and friends (see ``docs/prometheus.md``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.prometheus_api.alertsources import alertmanager_alerts, prometheus_alerts
from chaos_ext._core.prometheus_api.alertstate import RuleState
from chaos_ext._core.prometheus_api.alertwatch import AlertSpec, firing_alerts, parse_alerts_section
from chaos_ext._core.prometheus_api.client import client
from chaos_ext._core.prometheus_api.promql import check_promql, histogram_quantile_expr
from chaos_ext._core.prometheus_api.replay import restore
from chaos_ext._core.prometheus_api.results import (
    AGGREGATES,
    Condition,
    aggregate,
    fraction_holding,
    parse_instant,
    parse_range,
    shown,
    single_value,
    summarize,
)
from chaos_ext._core.validation import PARSED, require_range, validated_by
from chaos_ext.errors import EmptyResult, InvalidArgument
from chaos_ext.prometheus._probe_files import CatalogProbe, default_catalog

__all__ = [
    "alerts_quiet",
    "catalog_check",
    "catalog_probe",
    "histogram_quantile",
    "query_series",
    "query_stats",
    "query_value",
    "slo_fraction",
    "slo_holds",
]

logger = logging.getLogger("chaostoolkit")


def _check_expr(arguments: Mapping[str, Any]) -> None:
    if "expr" in arguments:
        check_promql(arguments["expr"], "expr")


def _check_value_args(arguments: Mapping[str, Any]) -> None:
    _check_expr(arguments)
    how = arguments.get("aggregate", "single")
    if how != "single" and how not in AGGREGATES:
        raise InvalidArgument(f"aggregate={how!r} is not one of single, {', '.join(AGGREGATES)}")


def _check_window_args(arguments: Mapping[str, Any]) -> None:
    _check_expr(arguments)
    window = require_range(
        "window_seconds", arguments.get("window_seconds", 300), 0.001, 31 * 86_400
    )
    step = require_range("step_seconds", arguments.get("step_seconds", 15), 0.001, 86_400)
    if step > window:
        raise InvalidArgument(f"step_seconds={step!r} is longer than window_seconds={window!r}")
    if "op" in arguments or "threshold" in arguments:
        Condition(str(arguments.get("op", "<")), float(arguments.get("threshold", 0.0)))
    require_range("min_fraction", arguments.get("min_fraction", 1.0), 0.0, 1.0)


def _check_catalog_args(arguments: Mapping[str, Any]) -> tuple[CatalogProbe, str]:
    """The catalog entry and its query, filled with ``parameters`` (parsed once: the
    probe's body uses them as they are)."""
    probe = default_catalog().get(str(arguments.get("name")))
    expr = probe.render(arguments.get("parameters") or {})
    if arguments.get("window_seconds"):
        _check_window_args(arguments)
    return probe, expr


def _value(
    expr: str,
    how: str,
    if_empty: float | None,
    if_nan: float | None,
    configuration: Configuration,
    secrets: Secrets,
) -> float:
    samples = parse_instant(client(configuration, secrets).instant(expr), expr)
    return single_value(samples, expr, how=how, if_empty=if_empty, if_nan=if_nan)


def _window_series(
    expr: str, window_s: float, step_s: float, configuration: Configuration, secrets: Secrets
) -> tuple[list[tuple[float, float]], int]:
    """Points at step-aligned times over the window (as ``(expr)[window:step]``) of the
    query's one series, and how many slots the window has."""
    step_ms = round(step_s * 1000)
    end = (int(time.time() * 1000) // step_ms) * step_ms / 1000
    start = end - window_s
    slots = math.floor(window_s * 1000 / step_ms) + 1
    result = client(configuration, secrets).range(expr, start=start, end=end, step=step_s)
    series = parse_range(result, expr)
    if len(series) > 1:
        aggregate([0.0], "single", expr, len(series))  # raises with the aggregation hint
    return (list(series[0].points) if series else []), slots


def _window_values(
    expr: str, window_s: float, step_s: float, configuration: Configuration, secrets: Secrets
) -> tuple[list[float], int]:
    """The values of :func:`_window_series`, and how many slots the window has."""
    points, slots = _window_series(expr, window_s, step_s, configuration, secrets)
    return [v for _, v in points], slots


@validated_by(_check_value_args)
def query_value(
    expr: str,
    aggregate: str = "single",
    if_empty: float | None = None,
    if_nan: float | None = None,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> float:
    """Evaluate an instant PromQL query and return its value as a float.

    The query must return one series or a scalar (else aggregate in PromQL, or
    pass aggregate=sum|max|min|mean). No series raises EmptyResult unless
    ``if_empty`` gives the value that stands for it; NaN likewise with ``if_nan``.
    Read-only: no blast radius, nothing to roll back.
    """
    return _value(expr, aggregate, if_empty, if_nan, configuration, secrets)


@validated_by(_check_window_args)
def query_series(
    expr: str,
    window_seconds: float = 120,
    step_seconds: float = 1,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Return a query's samples over the last window, for reports and comparisons.

    ``{"expr", "series": [[unix_time, value], ...], "stats": {min, max, mean,
    p50, p95, p99, count}}``; one series only (aggregate in PromQL).
    ``gameday report`` charts the series with the fault windows shaded, and
    ``gameday compare`` compares their distributions. Read-only.
    """
    points, _ = _window_series(expr, window_seconds, step_seconds, configuration, secrets)
    return {
        "expr": expr,
        "series": [[t, v] for t, v in points],
        "stats": summarize([v for _, v in points]),
    }


@validated_by(_check_window_args)
def query_stats(
    expr: str,
    window_seconds: float = 300,
    step_seconds: float = 15,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, float]:
    """Summarize a query over the last window: min/max/mean/p50/p95/p99/count.

    Samples are taken every ``step`` at step-aligned times, exactly as the
    subquery ``(expr)[window:step]`` would, so the figures equal PromQL's
    ``min_over_time``/``quantile_over_time`` on it. One series only. Read-only.
    """
    values, _ = _window_values(expr, window_seconds, step_seconds, configuration, secrets)
    stats = summarize(values)
    if not stats["count"]:
        raise EmptyResult(f"{shown(expr)} has no sample in the last {window_seconds:g} s")
    return stats


@validated_by(_check_window_args)
def slo_fraction(
    expr: str,
    op: str = "<",
    threshold: float = 0.0,
    window_seconds: float = 300,
    step_seconds: float = 15,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> float:
    """Fraction (0..1) of the window's step slots in which ``expr <op> threshold`` held.

    Slots without data, and NaN samples, count as not holding. Read-only.
    """
    condition = Condition(op, float(threshold))
    values, slots = _window_values(expr, window_seconds, step_seconds, configuration, secrets)
    return fraction_holding(values, condition, slots)


@validated_by(_check_window_args)
def slo_holds(
    expr: str,
    op: str = "<",
    threshold: float = 0.0,
    window_seconds: float = 300,
    step_seconds: float = 15,
    min_fraction: float = 1.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> bool:
    """True when ``expr <op> threshold`` held in at least min_fraction of the window.

    "p99 < 0.3 s in 95 % of the last 10 minutes" is ``slo_holds(expr=<p99 query>,
    op="<", threshold=0.3, window_seconds=600, min_fraction=0.95)``; pair with the
    tolerance ``true``. Gaps and NaN count against the SLO. Read-only.
    """
    fraction = slo_fraction(
        expr, op, threshold, window_seconds, step_seconds, configuration, secrets
    )
    return fraction >= float(min_fraction)


def _check_histogram_args(arguments: Mapping[str, Any]) -> None:
    histogram_quantile_expr(
        str(arguments.get("metric")),
        float(arguments.get("quantile", 0.99)),
        arguments.get("window_seconds", 300),
        arguments.get("selector"),
        arguments.get("by") or [],
    )


@validated_by(_check_histogram_args)
def histogram_quantile(
    metric: str,
    quantile: float = 0.99,
    window_seconds: float = 300,
    selector: dict[str, str] | None = None,
    if_empty: float | None = None,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> float:
    """Return a quantile (0.99 = p99) of a Prometheus histogram over the last window.

    Builds ``histogram_quantile(q, sum by (le) (rate(<metric>_bucket{selector}[window])))``;
    ``selector`` maps labels to values (prefix ``~`` for a regex, ``!`` to exclude).
    No traffic in the window (NaN) raises EmptyResult unless ``if_empty`` is given.
    Read-only.
    """
    expr = histogram_quantile_expr(metric, float(quantile), window_seconds, selector)
    return _value(expr, "single", if_empty, if_empty, configuration, secrets)


@validated_by(_check_catalog_args)
def catalog_probe(
    name: str,
    parameters: dict[str, Any] | None = None,
    configuration: Configuration = None,
    secrets: Secrets = None,
    *,
    parsed: tuple[CatalogProbe, str] = PARSED,
) -> float:
    """Evaluate a named probe of the catalog (probes/*.yaml) and return its value.

    ``parameters`` fill the entry's placeholders (``{"job": "checkout"}``).
    Use a range tolerance, or ``catalog_check`` to apply the catalog's own
    tolerance. Read-only.
    """
    probe, expr = parsed
    return _value(expr, "single", probe.if_empty, probe.if_nan, configuration, secrets)


@validated_by(_check_catalog_args)
def catalog_check(
    name: str,
    parameters: dict[str, Any] | None = None,
    window_seconds: float = 0,
    step_seconds: float = 15,
    min_fraction: float = 1.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
    *,
    parsed: tuple[CatalogProbe, str] = PARSED,
) -> bool:
    """True when a named catalog probe is within the tolerance the catalog gives it.

    Without ``window_seconds`` the current value is judged; with it the probe
    must have held in at least ``min_fraction`` of it (see slo_holds). Pair
    with the tolerance ``true``. Read-only.
    """
    probe, expr = parsed
    if not window_seconds:
        value = _value(expr, "single", probe.if_empty, probe.if_nan, configuration, secrets)
        return probe.tolerance.holds(value)
    values, slots = _window_values(expr, window_seconds, step_seconds, configuration, secrets)
    if probe.if_nan is not None:
        values = [probe.if_nan if math.isnan(v) else v for v in values]
    return fraction_holding(values, probe.tolerance, slots) >= float(min_fraction)


def _alert_spec(arguments: Mapping[str, Any]) -> AlertSpec:
    section = {k: arguments[k] for k in ("rules", "select", "firing") if arguments.get(k)}
    return parse_alerts_section(section, "alerts_quiet", Path.cwd())


def _check_alert_args(arguments: Mapping[str, Any]) -> AlertSpec:
    return _alert_spec(arguments)


@validated_by(_check_alert_args)
def alerts_quiet(
    rules: list[str] | None = None,
    select: list[str] | None = None,
    firing: list[str] | None = None,
    include_pending: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
    *,
    parsed: AlertSpec = PARSED,
) -> bool:
    """True when none of the selected alerts is firing (a steady-state probe; tolerance true).

    ``rules``: Prometheus rule files or PrometheusRule manifests (a mixin's
    alerts); their expressions are evaluated through the query API with
    Prometheus's semantics, the recent past replayed by a range query, so an
    alert counts as firing once its expression has held for its ``for:``.
    ``select``: selectors such as ``severity=critical`` (any; default all).
    ``firing``: also ask ``prometheus`` (/api/v1/alerts) and/or
    ``alertmanager`` (API v2, ``alertmanager_url``). ``include_pending``:
    pending alerts count too. What fires is logged. Read-only.
    """
    spec = parsed  # checked and parsed once, by @validated_by
    prom = client(configuration, secrets)
    now, noisy = time.time(), list[str]()
    for rule in spec.rules:
        state = RuleState(rule)
        restore(prom, state, now, 15.0)
        state.evaluate(parse_instant(prom.instant(rule.expr, at=now), rule.expr), now)
        found = state.active.values() if include_pending else state.firing()
        noisy.extend(f"{rule.name} {a.state} {a.labels}" for a in found)
    sources: dict[str, Any] = {}
    for source in sorted({w.source for w in spec.firing}):
        if source == "alertmanager":
            sources[source] = alertmanager_alerts(configuration, secrets)
        else:
            sources[source] = prometheus_alerts(prom)
    listed = [a for found in sources.values() for a in found]
    noisy.extend(
        f"{a.labels.get('alertname')} firing in {a.source} {dict(a.labels)}"
        for a in firing_alerts([], spec.firing, listed).external
    )
    for line in noisy:
        logger.warning("alerts_quiet: %s", line)
    return not noisy
