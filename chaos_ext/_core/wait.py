"""Bounded polling shared by probes and actions that wait for the cluster to settle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["poll"]

T = TypeVar("T")


def poll(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    *,
    wait_seconds: float,
    interval_seconds: float = 1.0,
    stop: threading.Event | None = None,
) -> T:
    """Call ``fetch`` until ``done(value)`` or ``wait_seconds`` elapsed; return the last value.

    ``wait_seconds=0`` fetches once. The interval shrinks for short waits (a tenth of
    ``wait_seconds``, at least 50 ms) so a short wait still polls several times.
    """
    deadline = time.monotonic() + max(0.0, wait_seconds)
    pause = max(
        0.05, min(interval_seconds, wait_seconds / 10 if wait_seconds > 0 else interval_seconds)
    )
    waiter = stop or threading.Event()
    while True:
        value = fetch()
        if done(value) or time.monotonic() + pause > deadline or waiter.is_set():
            return value
        waiter.wait(pause)
