"""Test probes with real numeric outputs, for report and gate tests.

They measure TCP connects to a port on 127.0.0.1 (a real syscall against a
real listener started by the test or by ``support.faultkit.hold_port``).
"""

from __future__ import annotations

import socket
import time
from typing import Any

__all__ = ["connect_ms", "connect_series", "echo_secret"]


def _connect_ms(port: int) -> float:
    begin = time.perf_counter()
    with socket.socket() as sock:
        sock.settimeout(1)
        if sock.connect_ex(("127.0.0.1", port)) != 0:
            return -1.0
    return (time.perf_counter() - begin) * 1000


def connect_ms(port: int) -> float:
    """Milliseconds to connect to 127.0.0.1:port, -1 when refused."""
    return _connect_ms(port)


def connect_series(port: int, count: int = 5, interval: float = 0.1) -> dict[str, Any]:
    """``count`` connect times as ``series`` of ``[epoch, ms]`` pairs (bounded: count <= 50)."""
    series = []
    for _ in range(min(count, 50)):
        series.append([time.time(), _connect_ms(port)])
        time.sleep(interval)
    return {"series": series, "count": len(series)}


def echo_secret(value: str) -> str:
    """Returns its argument: how a careless activity leaks a secret into a journal."""
    return f"connected with {value}"
