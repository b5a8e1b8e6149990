"""Optional Prometheus exposition of a running load (served by its coordinator).

The collector tails the workers' bucket files, so what Prometheus sees is the
same data as the journal, about one bucket behind real time:

* ``gameday_load_requests_total{load, outcome}``: outcome is ``ok``, an error
  kind (``connect``, ``dns``, ``timeout``, ``http_4xx``, ``http_5xx``,
  ``other``) or ``dropped``;
* ``gameday_load_request_duration_seconds{load}``: histogram of response
  latency measured from the scheduled send time;
* ``gameday_load_target_rate{load}``: the profile's current rate (req/s).

Catalog queries work on it as on any service, e.g. the error ratio
``sum(rate(gameday_load_requests_total{outcome!="ok"}[1m])) /
sum(rate(gameday_load_requests_total[1m]))`` and
``histogram_quantile(0.99, rate(gameday_load_request_duration_seconds_bucket[1m]))``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from chaos_ext.load.results import ERROR_KINDS, LE_BOUNDS
from chaos_ext.load.schedule import rate_at
from chaos_ext.load.spec import LoadSpec

__all__ = ["LoadCollector", "serve_metrics"]


class LoadCollector:
    """A prometheus_client collector over one load's results directory."""

    def __init__(self, spec: LoadSpec, results_dir: Path, label: str, start: float) -> None:
        self.spec, self.results_dir, self.label, self.start = spec, results_dir, label, start
        self.offsets: dict[Path, int] = {}
        self.outcomes = dict.fromkeys(("ok", *ERROR_KINDS, "dropped"), 0)
        self.le = [0] * (len(LE_BOUNDS) + 1)
        self.lat_sum = 0.0
        self.lock = threading.Lock()

    def _consume(self, line: dict[str, Any]) -> None:
        self.outcomes["ok"] += line["ok"]
        self.outcomes["dropped"] += line["dropped"]
        for kind, count in line["errors"].items():
            self.outcomes[kind] = self.outcomes.get(kind, 0) + count
        for i, count in enumerate(line["le"]):
            self.le[i] += count
        self.lat_sum += line["lat_sum"]

    def refresh(self) -> None:
        """Read the lines written since the last scrape."""
        for path in sorted(self.results_dir.glob("worker-*.jsonl")):
            offset = self.offsets.get(path, 0)
            with path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read()
            complete = data[: data.rfind(b"\n") + 1]
            for raw in complete.splitlines():
                self._consume(json.loads(raw))
            self.offsets[path] = offset + len(complete)

    def _target_rate(self) -> float:
        return rate_at(self.spec.segments, time.time() - self.start)

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            self.refresh()
            requests = CounterMetricFamily(
                "gameday_load_requests", "Requests by outcome", labels=["load", "outcome"]
            )
            for outcome, count in self.outcomes.items():
                requests.add_metric([self.label, outcome], count)
            buckets, running = [], 0
            for bound, count in zip((*LE_BOUNDS, float("inf")), self.le, strict=True):
                running += count
                buckets.append(("+Inf" if bound == float("inf") else f"{bound:g}", running))
            latency = HistogramMetricFamily(
                "gameday_load_request_duration_seconds",
                "Response latency from the scheduled send time",
                labels=["load"],
            )
            latency.add_metric([self.label], buckets, sum_value=self.lat_sum)
            rate = GaugeMetricFamily(
                "gameday_load_target_rate", "Scheduled request rate (req/s)", labels=["load"]
            )
            rate.add_metric([self.label], self._target_rate())
        yield requests
        yield latency
        yield rate


def serve_metrics(
    spec: LoadSpec, results_dir: Path, label: str, start: float, port: int, addr: str
) -> tuple[Any, int]:
    """Serve /metrics on ``addr:port`` (port 0: any free port); return (server, port)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LoadCollector(spec, results_dir, label, start))
    server, _thread = start_http_server(max(port, 0), addr=addr, registry=registry)
    return server, int(server.server_port)
