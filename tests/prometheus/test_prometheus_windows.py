"""Window probes against a real Prometheus: stats, SLO fractions, histogram quantiles.

The exporter serves a known value per scrape; the expected figures come from
what it served and from Prometheus's own ``*_over_time`` functions on the same
subquery (an independent implementation).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from support.exporter import Exporter
from support.promquery import raw_query, wait_result, wait_value

from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer
from chaos_ext.errors import EmptyResult
from chaos_ext.prometheus import probes

SERVED = [120.0, 80.0, 95.0, 310.0, 150.0, 90.0, 450.0, 100.0, 130.0, 85.0, 70.0, 110.0]


@pytest.fixture(scope="module")
def served(exporter: Exporter, prom: PrometheusServer) -> str:
    """A gauge that took each value of SERVED for one scrape (shared by this module)."""
    name = f"t_served_{uuid.uuid4().hex[:8]}"
    sequence = exporter.sequence(name, SERVED)
    deadline = time.monotonic() + 40
    while len(sequence.served) < len(SERVED) + 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(sequence.served) > len(SERVED), "the exporter was not scraped often enough"
    wait_value(prom, name, SERVED[-1])
    return name


def _within_one_second(call: Callable[[], Any]) -> tuple[Any, int]:
    """Call a window probe so that its step-aligned end is known: the current second."""
    for _ in range(5):
        before = int(time.time())
        result = call()
        if int(time.time()) == before:
            return result, before
    raise AssertionError("could not call the probe within one wall-clock second")


def _prom_value(prom: PrometheusServer, expr: str, at: int) -> float:
    return float(raw_query(prom, expr, time=str(at))["result"][0]["value"][1])


OVER_TIME = {
    "p50": "quantile_over_time(0.5, {})",
    "p95": "quantile_over_time(0.95, {})",
    "p99": "quantile_over_time(0.99, {})",
    "mean": "avg_over_time({})",
    "min": "min_over_time({})",
    "max": "max_over_time({})",
    "count": "count_over_time({})",
}


def test_stats_match_the_served_values_and_prometheus_over_time(
    served: str, prom: PrometheusServer, config: dict[str, Any]
) -> None:
    # stored samples are exactly the served sequence
    stored = raw_query(prom, f"{served}[60s]")["result"][0]["values"]
    assert [float(v) for _, v in stored][: len(SERVED)] == SERVED

    stats, at = _within_one_second(
        lambda: probes.query_stats(served, window_seconds=40, step_seconds=1, configuration=config)
    )
    assert stats["min"] == min(SERVED) and stats["max"] == max(SERVED)
    for key, template in OVER_TIME.items():
        want = _prom_value(prom, template.format(f"{served}[40s:1s]"), at)
        assert stats[key] == pytest.approx(want, rel=1e-12), key


def test_series_are_the_stored_samples_at_step_aligned_times(
    served: str, prom: PrometheusServer, config: dict[str, Any]
) -> None:
    result, at = _within_one_second(
        lambda: probes.query_series(served, window_seconds=40, step_seconds=1, configuration=config)
    )
    times = [t for t, _ in result["series"]]
    assert times == sorted(times) and all(float(t).is_integer() for t in times)
    assert at - 40 <= times[0] and times[-1] <= at
    # the same points as Prometheus's own subquery over the window
    want = raw_query(prom, f"{served}[40s:1s]", time=str(at))["result"][0]["values"]
    assert [[float(t), float(v)] for t, v in want] == result["series"]
    assert set(SERVED) <= {v for _, v in result["series"]}
    assert result["stats"]["max"] == max(SERVED) and result["stats"]["count"] == len(times)


def test_slo_fraction_semantics(
    served: str, prom: PrometheusServer, config: dict[str, Any]
) -> None:
    fraction, at = _within_one_second(
        lambda: probes.slo_fraction(served, "<", 300, 40, 1, configuration=config)
    )
    # held slots / all 41 slots of the window (gaps count against the SLO)
    held = _prom_value(prom, f"sum_over_time(({served} < bool 300)[40s:1s])", at)
    assert fraction == pytest.approx(held / 41)
    # of the values served, exactly two (310, 450) break "< 300"
    assert sum(1 for v in SERVED if not v < 300) == 2
    assert 0 < fraction < 1
    assert probes.slo_holds(served, "<", 300, 40, 1, fraction, configuration=config)
    stricter = min(1.0, fraction + 0.05)
    assert not probes.slo_holds(served, "<", 300, 40, 1, stricter, configuration=config)
    assert probes.slo_holds(served, "<", 1000, 5, 1, 1.0, configuration=config)
    assert not probes.slo_holds(served, ">", 1000, 5, 1, 0.01, configuration=config)


def test_histogram_quantiles_match_the_observations(
    exporter: Exporter,
    prom: PrometheusServer,
    config: dict[str, Any],
    metric: Callable[[str], str],
) -> None:
    name = metric("request_seconds")
    histogram = exporter.histogram(name, buckets=[0.1, 0.25, 0.5, 1.0])
    wait_result(prom, f"{name}_count")  # a first sample with no observations
    time.sleep(1.1)
    for value, times in ((0.05, 80), (0.3, 15), (0.7, 5)):
        for _ in range(times):
            histogram.observe(value)
    wait_value(prom, f"{name}_count", 100)
    # linear interpolation inside the bucket, as histogram_quantile does:
    # p50: 0 + 0.1 * 50/80; p95: 0.25 + 0.25 * (95-80)/15; p99: 0.5 + 0.5 * (99-95)/5
    expected = {0.5: 0.0625, 0.95: 0.5, 0.99: 0.9}
    for quantile, want in expected.items():
        got = probes.histogram_quantile(
            name, quantile, 30, {"job": "gameday"}, configuration=config
        )
        assert got == pytest.approx(want, rel=1e-9), quantile
    with pytest.raises(EmptyResult, match="returned no series"):
        probes.histogram_quantile(name, 0.99, 30, {"job": "nobody"}, configuration=config)
