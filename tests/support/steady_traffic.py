"""A real Prometheus scraping a service that answers every request with 200.

For end-to-end game-day runs whose hypothesis reads the error ratio from
Prometheus: ``http_requests_total{job="<job>", code="200"}`` grows by 20 per
second from a bounded background thread (stops on exit or after ``max_s``);
``code="500"`` stays at 0.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from chaos_ext._products.sandbox.servers import prometheus
from support.exporter import start_exporter

__all__ = ["steady_traffic"]


@contextmanager
def steady_traffic(job: str = "api", *, history_s: float = 6, max_s: float = 300) -> Iterator[str]:
    """Yield the URL of a Prometheus that has ``history_s`` seconds of error-free traffic."""
    exporter = start_exporter()
    requests = exporter.counter("http_requests_total", ["code"])
    requests.labels("500")  # the 5xx series exists, at 0, as in a service that has served one
    stop = threading.Event()

    def serve() -> None:
        deadline = time.monotonic() + max_s
        while not stop.wait(0.1) and time.monotonic() < deadline:
            requests.labels("200").inc(2)

    thread = threading.Thread(target=serve, name="steady-traffic", daemon=True)
    thread.start()
    try:
        with prometheus.start(jobs={job: [exporter.target]}, scrape_interval="1s") as server:
            server.wait_scraped(timeout=30)
            time.sleep(history_s)
            yield server.url
    finally:
        stop.set()
        thread.join(timeout=5)
        exporter.stop()
