"""The one percentile definition (``chaos_ext._core.percentile``), for samples and histograms.

Reference values come from Prometheus's own PromQL test data for
``quantile_over_time`` (``promql/promqltest/testdata/functions.test`` of
https://github.com/prometheus/prometheus at commit
11b27d5d229d7ee815bd7cfc77c6682b1f3eed0c, Apache-2.0) and from numpy's
``percentile`` documentation example; a live check against a real Prometheus
is in ``tests/prometheus/test_prometheus_percentile_live.py``.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from chaos_ext._core.percentile import (
    METHOD,
    LatencyRecorder,
    histogram_of,
    histogram_percentiles,
    latency_summary_ms,
    new_latency_histogram,
    percentile,
    percentiles,
)

# load 10s / data{test=...} / eval instant at 1m quantile_over_time(q, data[1m])
PROMQL_TESTDATA = {
    "two samples": ([0, 1], {0: 0, 0.5: 0.5, 0.75: 0.75, 0.8: 0.8, 1: 1}),
    "three samples": ([0, 1, 2], {0: 0, 0.5: 1, 0.75: 1.5, 0.8: 1.6, 1: 2}),
    "uneven samples": ([0, 1, 4], {0: 0, 0.5: 1, 0.75: 2.5, 0.8: 2.8, 1: 4}),
}


@pytest.mark.parametrize("series", sorted(PROMQL_TESTDATA))
def test_matches_promql_quantile_over_time_testdata(series: str) -> None:
    values, expected = PROMQL_TESTDATA[series]
    for q, value in expected.items():
        assert percentile(values, 100 * q) == pytest.approx(value)


def test_matches_numpys_documented_example() -> None:
    # numpy.percentile docs: a = [[10, 7, 4], [3, 2, 1]]; np.percentile(a, 50) -> 3.5
    assert percentile([10, 7, 4, 3, 2, 1], 50) == 3.5
    data = [random.Random(7).gauss(0, 1) for _ in range(501)]
    assert percentiles(data, (1, 50, 99.9)) == pytest.approx(
        dict(zip((1.0, 50.0, 99.9), np.percentile(data, [1, 50, 99.9]), strict=True))
    )


def test_edges_and_bad_input() -> None:
    assert percentile([], 50) is None
    assert percentiles([], (50, 99)) == {50.0: None, 99.0: None}
    assert percentile([7.0], 99) == 7.0
    assert percentile([3, 1, 2], 0) == 1 and percentile([3, 1, 2], 100) == 3
    for bad in (-1, 101, 0.5j, True, "95"):
        with pytest.raises(ValueError, match=r"within \[0, 100\]"):
            percentile([1.0], bad)  # type: ignore[arg-type]
    assert "linear interpolation between closest ranks" in METHOD


def _exact_and_histogram(values: list[int]) -> tuple[HdrHistogram, dict[float, float | None]]:
    hist = new_latency_histogram()
    for v in values:
        hist.record_value(v)
    return hist, percentiles(values, QS)


QS = (0, 1, 50, 90, 95, 99, 99.9, 100)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 1000, 50_000])
def test_histogram_percentiles_bound_the_exact_ones(n: int) -> None:
    """Never below the exact type-7 value, at most 0.1 % (+1 µs) above it."""
    rng = random.Random(n)
    values = [int(rng.lognormvariate(8, 1.5)) + 1 for _ in range(n)]
    hist, exact = _exact_and_histogram(values)
    found = histogram_percentiles(hist, QS)
    for q in QS:
        low = exact[q]
        assert low is not None
        assert low - 1e-6 <= found[q] <= low * 1.001 + 1, (q, found[q], low)  # type: ignore[operator]


def test_histogram_of_equals_recording_one_by_one() -> None:
    rng = random.Random(3)
    values = [int(rng.expovariate(1 / 20_000)) for _ in range(20_000)] + [0, -5, 10**12]
    one_by_one = new_latency_histogram()
    for v in values:
        one_by_one.record_value(min(max(v, 1), 130_000_000))
    fast = histogram_of(values)
    assert fast.get_total_count() == one_by_one.get_total_count() == len(values)
    assert histogram_percentiles(fast, QS) == histogram_percentiles(one_by_one, QS)
    assert fast.get_max_value() == one_by_one.get_max_value()


def test_recorder_folds_merges_and_travels_between_processes() -> None:
    recorder = LatencyRecorder()
    for i in range(150_000):  # more than two folds
        recorder.add(0.001 + (i % 1000) * 1e-6)
    other = LatencyRecorder.decode(recorder.encode())
    other.merge(recorder)
    assert other.histogram().get_total_count() == 300_000
    summary = other.summary_ms((50, 99, 99.9, 100))
    assert set(summary) == {"p50_ms", "p99_ms", "p99_9_ms", "max_ms", "mean_ms"}
    assert summary["p50_ms"] == pytest.approx(1.5, rel=0.002)
    assert summary["max_ms"] == pytest.approx(1.999, rel=0.002)
    assert LatencyRecorder().summary_ms() == {
        "p50_ms": None,
        "p95_ms": None,
        "p99_ms": None,
        "mean_ms": None,
    }
    assert LatencyRecorder.decode("").encode() == ""
    service = latency_summary_ms(other.histogram(), (50,), prefix="service_", mean=False)
    assert service == {"service_p50_ms": summary["p50_ms"]}
