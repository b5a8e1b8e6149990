"""Pure evaluation helpers: durations, conditions, percentiles, SLO fractions."""

from __future__ import annotations

import math

import pytest

from chaos_ext._core.prometheus_api.promql import histogram_quantile_expr, matchers
from chaos_ext._core.prometheus_api.results import (
    Condition,
    fraction_holding,
    parse_duration,
    parse_instant,
    summarize,
)
from chaos_ext.errors import InvalidArgument


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h30m", 5400), ("500ms", 0.5), (2, 2.0), ("1.5s", 1.5)],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "5 m", "m5", "0s", "5mm", -1])
def test_bad_durations(text: str | int) -> None:
    with pytest.raises(InvalidArgument):
        parse_duration(text)


def test_summary_ignores_nan() -> None:
    stats = summarize([1.0, math.nan, 3.0])
    assert stats["count"] == 2 and stats["mean"] == 2.0 and stats["max"] == 3.0


def test_conditions() -> None:
    assert Condition("<", 0.3).holds(0.29) and not Condition("<", 0.3).holds(0.3)
    assert Condition.from_spec({"range": [1, 2]}, "t").holds(2.0)
    assert not Condition(">=", 0).holds(math.nan)
    with pytest.raises(InvalidArgument, match="op"):
        Condition("=<", 1)


def test_fraction_counts_gaps_and_nan_against_the_slo() -> None:
    under = Condition("<", 300)
    assert fraction_holding([100.0] * 19 + [500.0], under, 20) == 0.95
    assert fraction_holding([100.0] * 10, under, 20) == 0.5
    assert fraction_holding([100.0, math.nan], under, 2) == 0.5


def test_scalar_and_vector_answers() -> None:
    assert parse_instant([1700000000.5, "2.5"], "x")[0].value == 2.5
    vector = [{"metric": {"a": "1"}, "value": [1.0, "+Inf"]}]
    assert parse_instant(vector, "x")[0].value == math.inf


def test_histogram_expression_and_matchers() -> None:
    assert matchers({"job": "api", "code": "~5..", "pod": "!x"}) == (
        '{code=~"5..",job="api",pod!="x"}'
    )
    assert histogram_quantile_expr("lat_seconds", 0.99, 60, {"job": 'a"b'}) == (
        'histogram_quantile(0.99, sum by (le) (rate(lat_seconds_bucket{job="a\\"b"}[60s])))'
    )
    assert "[1500ms]" in histogram_quantile_expr("lat_seconds", 0.5, 1.5)
    with pytest.raises(InvalidArgument):
        histogram_quantile_expr("lat seconds", 0.99, 60)
    with pytest.raises(InvalidArgument):
        histogram_quantile_expr("lat", 99, 60)
    for bad in (0, -5, "1m", True):
        with pytest.raises(InvalidArgument, match="window_seconds"):
            histogram_quantile_expr("lat", 0.5, bad)  # type: ignore[arg-type]
