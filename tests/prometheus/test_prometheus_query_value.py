"""query_value against a real Prometheus: numbers as served, explicit empty/NaN, typed errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.exporter import Exporter
from support.promquery import wait_value

from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port
from chaos_ext.errors import (
    EmptyResult,
    InvalidArgument,
    PrometheusError,
    PrometheusUnreachable,
    PromQLError,
)
from chaos_ext.prometheus import probes


def test_value_is_the_float_the_exporter_served(
    exporter: Exporter,
    prom: PrometheusServer,
    config: dict[str, Any],
    metric: Callable[[str], str],
) -> None:
    name = metric("gauge")
    gauge = exporter.gauge(name)
    gauge.set(0.125)
    wait_value(prom, name, 0.125)
    value = probes.query_value(name, configuration=config)
    assert value == 0.125 and isinstance(value, float)
    gauge.set(-3.5)
    wait_value(prom, name, -3.5)
    assert probes.query_value(name, configuration=config) == -3.5
    assert probes.query_value(f"{name} * 2 + 1", configuration=config) == -6.0
    assert probes.query_value("scalar(vector(7))", configuration=config) == 7.0


def test_several_series_need_an_explicit_aggregate(
    exporter: Exporter,
    prom: PrometheusServer,
    config: dict[str, Any],
    metric: Callable[[str], str],
) -> None:
    name = metric("labelled")
    gauge = exporter.gauge(name, labels=["pod"])
    for pod, value in (("a", 1.0), ("b", 2.0), ("c", 4.5)):
        gauge.labels(pod=pod).set(value)
    wait_value(prom, f"sum({name})", 7.5)
    with pytest.raises(PrometheusError, match="returned 3 series where one was expected"):
        probes.query_value(name, configuration=config)
    assert probes.query_value(name, aggregate="sum", configuration=config) == 7.5
    assert probes.query_value(name, aggregate="max", configuration=config) == 4.5
    assert probes.query_value(name, aggregate="min", configuration=config) == 1.0
    assert probes.query_value(name, aggregate="mean", configuration=config) == 2.5


def test_empty_and_nan_are_explicit(config: dict[str, Any], metric: Callable[[str], str]) -> None:
    absent = metric("absent")
    with pytest.raises(EmptyResult, match="returned no series"):
        probes.query_value(absent, configuration=config)
    assert probes.query_value(absent, if_empty=0.0, configuration=config) == 0.0
    nan = "vector(0) / vector(0)"
    with pytest.raises(EmptyResult, match="is NaN"):
        probes.query_value(nan, configuration=config)
    assert probes.query_value(nan, if_nan=0.0, configuration=config) == 0.0


def test_a_promql_syntax_error_is_refused_before_any_request(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument) as caught:
        probes.query_value("sum(rate(http_requests_total[5m])", configuration=config)
    message = str(caught.value)
    assert "\n" not in message
    assert "sum(rate(http_requests_total[5m])" in message
    assert "unclosed left parenthesis" in message


def test_a_query_prometheus_rejects_is_one_line_quoting_prometheus(
    config: dict[str, Any],
) -> None:
    # valid syntax for promql-parser; Prometheus refuses the regular expression
    expr = 'label_replace(vector(1), "a", "$1", "b", "(")'
    with pytest.raises(PromQLError) as caught:
        probes.query_value(expr, configuration=config)
    message = str(caught.value)
    assert "\n" not in message
    assert expr in message and "regular expression" in message


def test_execution_error_is_a_promql_error(config: dict[str, Any]) -> None:
    two = 'label_replace(vector(1), "a", "x", "", "") or label_replace(vector(2), "a", "y", "", "")'
    with pytest.raises(PromQLError, match="many-to-one matching must be explicit"):
        probes.query_value(f"({two}) + on() vector(1)", configuration=config)


def test_unreachable_is_typed_and_fast() -> None:
    config = {"prometheus_url": f"http://127.0.0.1:{free_port()}", "prometheus_timeout_seconds": 2}
    with pytest.raises(PrometheusUnreachable, match="unreachable"):
        probes.query_value("up", configuration=config)


def test_missing_url_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgument, match="prometheus_url"):
        probes.query_value("up", configuration={})
