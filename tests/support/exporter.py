"""A small Prometheus exporter whose metrics the test controls (prometheus_client).

It listens on 127.0.0.1 on a free port (port 0) in a thread of the test process.
``sequence(name, values)`` serves one value per scrape, in order, then repeats the
last one, so the test knows exactly which samples Prometheus stored.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import start_http_server as _start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class _Sequence(Collector):
    def __init__(self, name: str, values: Sequence[float]) -> None:
        self.name = name
        self.values = list(values)
        self.served: list[float] = []
        self.lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self.lock:
            index = min(len(self.served), len(self.values) - 1)
            value = self.values[index]
            self.served.append(value)
        yield GaugeMetricFamily(self.name, "a value per scrape", value=value)

    def describe(self) -> list[Any]:
        return []


@dataclass
class Exporter:
    registry: CollectorRegistry
    server: Any
    thread: threading.Thread
    sequences: dict[str, _Sequence] = field(default_factory=dict)

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def gauge(self, name: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(name, f"test gauge {name}", list(labels), registry=self.registry)

    def counter(self, name: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(name, f"test counter {name}", list(labels), registry=self.registry)

    def histogram(self, name: str, buckets: Sequence[float]) -> Histogram:
        return Histogram(name, f"test histogram {name}", buckets=buckets, registry=self.registry)

    def sequence(self, name: str, values: Sequence[float]) -> _Sequence:
        collector = _Sequence(name, values)
        self.registry.register(collector)
        self.sequences[name] = collector
        return collector

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start_exporter() -> Exporter:
    registry = CollectorRegistry()
    server, thread = _start_http_server(0, addr="127.0.0.1", registry=registry)
    return Exporter(registry, server, thread)
