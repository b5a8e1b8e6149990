"""Ask a test Prometheus directly (urllib, not chaos_ext): the independent path."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer


def raw_query(prom: PrometheusServer, expr: str, **params: str) -> Any:
    """Prometheus's own answer, fetched without chaos_ext (an independent path)."""
    query = urllib.parse.urlencode({"query": expr, **params})
    with urllib.request.urlopen(f"{prom.url}/api/v1/query?{query}", timeout=5) as answer:  # noqa: S310
        return json.load(answer)["data"]


def wait_value(prom: PrometheusServer, expr: str, want: float, timeout: float = 10) -> None:
    """Wait until Prometheus answers ``want`` for ``expr`` (scraped and stored)."""
    deadline = time.monotonic() + timeout
    seen: Any = None
    while time.monotonic() < deadline:
        result = raw_query(prom, expr)["result"]
        seen = [r["value"][1] for r in result]
        if len(result) == 1 and float(result[0]["value"][1]) == want:
            return
        time.sleep(0.1)
    raise AssertionError(f"{expr} never became {want} (last {seen})")


def wait_result(prom: PrometheusServer, expr: str, timeout: float = 10) -> list[Any]:
    """Wait until ``expr`` returns at least one sample; return the result."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result: list[Any] = raw_query(prom, expr)["result"]
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"{expr} returned nothing for {timeout} s")
