"""Latency statistics: a bounded-memory histogram and percentiles (pure).

A flood at 70,000 queries/s for minutes would keep millions of floats; the
histogram keeps counts instead: 10 µs buckets below 100 ms, 1 ms buckets up
to 60 s (everything above lands in the last bucket). A percentile is the
upper edge of the bucket holding that rank, so it is never understated by
more than the bucket width.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["LatencyHistogram", "percentile"]

_FINE_US = 10
_FINE_LIMIT_US = 100_000
_COARSE_US = 1_000
_MAX_US = 60_000_000
_FINE_BUCKETS = _FINE_LIMIT_US // _FINE_US
_BUCKETS = _FINE_BUCKETS + (_MAX_US - _FINE_LIMIT_US) // _COARSE_US + 1


class LatencyHistogram:
    """Counts of latencies (seconds) in fixed buckets; ``add`` is O(1)."""

    __slots__ = ("count", "counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * _BUCKETS
        self.count = 0
        self.total = 0.0

    def add(self, seconds: float) -> None:
        micros = int(seconds * 1e6)
        if micros < _FINE_LIMIT_US:
            index = max(micros, 0) // _FINE_US
        else:
            index = min(_FINE_BUCKETS + (micros - _FINE_LIMIT_US) // _COARSE_US, _BUCKETS - 1)
        self.counts[index] += 1
        self.count += 1
        self.total += seconds

    def merge(self, other: LatencyHistogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.count += other.count
        self.total += other.total

    def to_sparse(self) -> dict[str, int]:
        """Non-empty buckets as ``{"index": count}`` (JSON, for another process)."""
        sparse = {str(i): n for i, n in enumerate(self.counts) if n}
        sparse["total_us"] = round(self.total * 1e6)
        return sparse

    @classmethod
    def from_sparse(cls, sparse: dict[str, int]) -> LatencyHistogram:
        hist = cls()
        for key, n in sparse.items():
            if key == "total_us":
                hist.total = n / 1e6
                continue
            hist.counts[int(key)] += n
            hist.count += n
        return hist

    def percentile_ms(self, q: float) -> float | None:
        """The ``q``-th percentile (0-100) in milliseconds; None when empty."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q / 100 * self.count))
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                return _upper_edge_us(index) / 1000
        return _MAX_US / 1000  # pragma: no cover - ranks never exceed count

    def summary(self) -> dict[str, float | None]:
        """p50/p95/p99 and mean in ms, rounded to microseconds."""
        mean = self.total / self.count * 1000 if self.count else None
        return {
            "p50_ms": _round(self.percentile_ms(50)),
            "p95_ms": _round(self.percentile_ms(95)),
            "p99_ms": _round(self.percentile_ms(99)),
            "mean_ms": _round(mean),
        }


def _upper_edge_us(index: int) -> int:
    if index < _FINE_BUCKETS:
        return (index + 1) * _FINE_US
    return min(_FINE_LIMIT_US + (index - _FINE_BUCKETS + 1) * _COARSE_US, _MAX_US)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by nearest rank; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]
