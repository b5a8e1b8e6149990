"""A real Prometheus (Debian's) scraping an exporter the tests control, every second."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.exporter import Exporter, start_exporter

from chaos_ext._core.prometheus_api import client as _client
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

SCRAPE_INTERVAL_S = 1.0


@pytest.fixture(scope="session")
def exporter() -> Iterator[Exporter]:
    exp = start_exporter()
    yield exp
    exp.stop()


@pytest.fixture(scope="session")
def prom(exporter: Exporter) -> Iterator[PrometheusServer]:
    with prometheus.start(targets=[exporter.target], scrape_interval="1s") as server:
        server.wait_scraped(timeout=30)
        yield server


@pytest.fixture
def config(prom: PrometheusServer) -> dict[str, Any]:
    return {"prometheus_url": prom.url, "prometheus_timeout_seconds": 5}


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    yield
    _client._cached.cache_clear()


@pytest.fixture
def metric() -> Callable[[str], str]:
    """A unique metric name for this test (the exporter is shared)."""
    suffix = uuid.uuid4().hex[:8]
    return lambda base: f"t_{base}_{suffix}"
