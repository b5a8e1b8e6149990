"""Open-loop arrival times: when each request of a rate profile is due (pure).

Request ``k`` (0, 1, 2, ...) is due when the profile's cumulative request
count reaches ``k``. Within a segment whose rate goes linearly from ``a`` to
``b`` over ``T`` seconds (slope ``s = (b - a) / T``), the count after ``t``
seconds is ``a t + s t^2 / 2``; solving for ``n`` requests gives
``t = 2 n / (a + sqrt(a^2 + 2 s n))`` (stable for ``s = 0`` and for ``a = 0``).

Arrivals depend only on the profile, never on responses: a slow server cannot
slow the schedule down (no coordinated omission). Worker ``i`` of ``w`` takes
requests ``i, i + w, i + 2w, ...`` of the one shared schedule.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from chaos_ext.load.spec import Segment

__all__ = ["arrival_offsets", "expected_requests", "rate_at"]


def arrival_offsets(
    segments: Sequence[Segment], *, first: int = 0, step: int = 1
) -> Iterator[tuple[int, float]]:
    """``(k, seconds from the start)`` for requests ``first, first + step, ...``."""
    k = first
    begin = 0.0  # the segment's start time
    done = 0.0  # requests due before the segment
    for seg in segments:
        count = seg.requests
        slope = (seg.end_rate - seg.start_rate) / seg.duration
        a = seg.start_rate
        while k < done + count:
            n = k - done
            root = math.sqrt(max(a * a + 2 * slope * n, 0.0))
            yield k, begin + (2 * n / (a + root) if a + root > 0 else 0.0)
            k += step
        begin += seg.duration
        done += count


def expected_requests(segments: Sequence[Segment], start: float, end: float) -> float:
    """How many requests the profile schedules in ``[start, end)`` seconds (exact integral)."""
    total = 0.0
    begin = 0.0
    for seg in segments:
        lo, hi = max(start, begin), min(end, begin + seg.duration)
        if hi > lo:
            slope = (seg.end_rate - seg.start_rate) / seg.duration
            rate_lo = seg.start_rate + slope * (lo - begin)
            rate_hi = seg.start_rate + slope * (hi - begin)
            total += (hi - lo) * (rate_lo + rate_hi) / 2
        begin += seg.duration
    return total


def rate_at(segments: Sequence[Segment], t: float) -> float:
    """The profile's rate (req/s) ``t`` seconds after the start; 0 outside it."""
    begin = 0.0
    for seg in segments:
        if begin <= t < begin + seg.duration:
            return seg.start_rate + (seg.end_rate - seg.start_rate) * (t - begin) / seg.duration
        begin += seg.duration
    return 0.0
