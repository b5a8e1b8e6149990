"""Test activities that record when they ran (to measure abort and rollback latency)."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["busy", "mark_time"]


def mark_time(path: str) -> float:
    """Write the current Unix time to ``path`` (a rollback the test can time)."""
    now = time.time()
    Path(path).write_text(f"{now:.6f}")
    return now


def busy(seconds: float, marker: str = "") -> int:
    """A long Python action: touch ``marker``, then compute for ``seconds`` (bounded to 60)
    in pure Python, never sleeping: a stop must cut it short between two instructions."""
    if marker:
        Path(marker).touch()
    end, rounds = time.monotonic() + min(float(seconds), 60.0), 0
    while time.monotonic() < end:
        rounds += sum(i * i for i in range(200)) % 7
    return rounds
