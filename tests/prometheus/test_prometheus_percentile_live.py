"""Our percentile is Prometheus's: ``quantile_over_time`` on a real server, same numbers.

The subquery ``vector(...)[61s:1s]`` needs no scraped data: it evaluates an
expression of ``time()`` at every second of the range, so Prometheus itself gives
both the samples (asked as a range vector) and its quantiles of them.
"""

from __future__ import annotations

import time

import pytest
import requests

from chaos_ext._core.percentile import percentiles
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

SAMPLES = "vector((time() * 7919) % 1000 + (time() % 7) / 10)[61s:1s]"
QUANTILES = (0.0, 0.01, 0.25, 0.5, 0.8, 0.95, 0.99, 1.0)


def _query(prom: PrometheusServer, expr: str, at: float) -> list[dict[str, object]]:
    answer = requests.get(
        f"{prom.url}/api/v1/query", params={"query": expr, "time": at}, timeout=10
    ).json()
    assert answer["status"] == "success", answer
    return answer["data"]["result"]  # type: ignore[no-any-return]


def test_quantile_over_time_agrees(prom: PrometheusServer) -> None:
    at = float(int(time.time()))
    (series,) = _query(prom, SAMPLES, at)
    values = [float(v) for _, v in series["values"]]  # type: ignore[attr-defined]
    assert len(values) >= 60 and len(set(values)) > 50  # 61 or 62: both ends count in 2.x
    ours = percentiles(values, [100 * q for q in QUANTILES])
    for q in QUANTILES:
        (theirs,) = _query(prom, f"quantile_over_time({q}, {SAMPLES})", at)
        assert ours[100 * q] == pytest.approx(float(theirs["value"][1]), rel=1e-12), q  # type: ignore[index]
