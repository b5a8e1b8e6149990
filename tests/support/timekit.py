"""Test activities that record when they ran (to measure abort and rollback latency)."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["mark_time"]


def mark_time(path: str) -> float:
    """Write the current Unix time to ``path`` (a rollback the test can time)."""
    now = time.time()
    Path(path).write_text(f"{now:.6f}")
    return now
