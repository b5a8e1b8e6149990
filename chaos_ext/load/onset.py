"""Errors by cause with their onset load, the breaking point, and latency amplification (pure).

A load's buckets (one per second of *scheduled* time, see ``results``) say
how many requests were scheduled, and how many failed and why: the client's
own error kinds (``timeout``, ``dns``, ``connect``...), ``dropped`` arrivals
and, with a ``cause_header``, the server's cause of each 5xx (``causes``).
:func:`error_classes` folds those into classes (:data:`DEFAULT_CLASSES`);
for each class, its **onset** is the first bucket holding at least
``min_errors`` errors of that class, and the **onset load** that bucket's
scheduled rate (requests scheduled in it / its seconds): under an open-loop
ramp, the load at which that kind of failure began. Its **share** is its
errors over all classified errors.

The **breaking point** is the first bucket whose trailing window of
``window`` buckets (the buckets so far, in the first seconds) breaks the
SLO: error ratio ((errors + dropped) / scheduled) above
``max_error_ratio``, or p95 (merged histograms, never averaged) above
``max_p95_ms``; its load is reported like an onset.

**Amplification** (the DB latency incident): the response time added by a
fault divided by the round-trip time it added, ``(during - before) /
(rtt_during - rtt_before)``: about the number of sequential round trips a
request makes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from chaos_ext.errors import InvalidArgument
from chaos_ext.load.results import MergedBucket

__all__ = [
    "DEFAULT_CLASSES",
    "BucketCounts",
    "ClassOnset",
    "amplification",
    "breaking_point",
    "class_counts",
    "error_classes",
]

#: raw cause or error kind -> class. Raw names: the client's error kinds
#: (``results.ERROR_KINDS`` without ``http_5xx``, which the server's cause
#: refines), ``dropped``, and the sandbox app's ``X-Error-Cause`` values.
DEFAULT_CLASSES: Mapping[str, str] = {
    "db-connect": "db-refused",
    "db-query": "db-query",
    "dns": "dns",
    "timeout": "upstream-timeout",
    "dropped": "upstream-timeout",
    "connect": "connect",
    "http_4xx": "http-4xx",
    "other": "other",
}
_UNEXPLAINED_5XX = "http-5xx"


@dataclass(frozen=True)
class BucketCounts:
    """What :func:`error_classes` needs of one bucket."""

    offset_seconds: float
    seconds: float
    scheduled: int
    errors: Mapping[str, int]
    dropped: int = 0
    causes: Mapping[str, int] | None = None

    @property
    def rate(self) -> float:
        """The load scheduled in this bucket (req/s)."""
        return self.scheduled / self.seconds if self.seconds else 0.0

    @classmethod
    def from_merged(cls, bucket: MergedBucket, origin: float) -> BucketCounts:
        """From a merged bucket of ``results``; ``origin``: the load's start (unix time)."""
        return cls(
            offset_seconds=round(bucket.start - origin, 3),
            seconds=bucket.seconds,
            scheduled=bucket.sent + bucket.dropped,
            errors=dict(bucket.errors),
            dropped=bucket.dropped,
            causes=dict(bucket.causes),
        )


@dataclass(frozen=True)
class ClassOnset:
    """One class of errors: how many, its share, where it began."""

    error_class: str
    count: int
    share: float
    onset_offset_seconds: float | None
    onset_rate: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def class_counts(bucket: BucketCounts, classes: Mapping[str, str]) -> dict[str, int]:
    """The bucket's errors by class: server causes first, then the client's kinds.

    A 5xx is counted under its cause's class; 5xx without a cause stay
    ``http-5xx``. An unknown raw name is its own class (nothing is lost).
    """
    out: dict[str, int] = {}

    def add(raw: str, count: int) -> None:
        if count > 0:
            name = classes.get(raw, raw)
            out[name] = out.get(name, 0) + count

    causes = bucket.causes or {}
    explained = 0
    for raw, count in causes.items():
        add(raw, count)
        explained += count
    for kind, count in bucket.errors.items():
        if kind == "http_5xx":
            if count > explained:
                out[_UNEXPLAINED_5XX] = out.get(_UNEXPLAINED_5XX, 0) + count - explained
        else:
            add(kind, count)
    add("dropped", bucket.dropped)
    return out


def error_classes(
    buckets: Sequence[BucketCounts],
    classes: Mapping[str, str] = DEFAULT_CLASSES,
    min_errors: int = 1,
) -> list[ClassOnset]:
    """Each class's count, share of all errors and onset; largest class first."""
    if min_errors < 1:
        raise InvalidArgument(f"min_errors: {min_errors} must be at least 1")
    totals: dict[str, int] = {}
    onsets: dict[str, BucketCounts] = {}
    for bucket in sorted(buckets, key=lambda b: b.offset_seconds):
        for name, count in class_counts(bucket, classes).items():
            totals[name] = totals.get(name, 0) + count
            if count >= min_errors and name not in onsets:
                onsets[name] = bucket
    everything = sum(totals.values())
    result = []
    for name, count in sorted(totals.items(), key=lambda item: (-item[1], item[0])):
        first = onsets.get(name)
        result.append(
            ClassOnset(
                error_class=name,
                count=count,
                share=round(count / everything, 6),
                onset_offset_seconds=None if first is None else first.offset_seconds,
                onset_rate=None if first is None else round(first.rate, 3),
            )
        )
    return result


def breaking_point(
    buckets: Sequence[BucketCounts],
    *,
    max_error_ratio: float,
    window: int = 5,
    p95_of: Callable[[int, int], float | None] | None = None,
    max_p95_ms: float = 0.0,
) -> dict[str, Any] | None:
    """The first bucket whose trailing ``window`` buckets break the SLO, or None.

    ``p95_of(first, last)`` gives the p95 (ms) of buckets ``first..last``
    (indices into ``buckets`` in time order, merged histograms); with
    ``max_p95_ms`` > 0 a p95 above it breaks the SLO too. Returns the
    bucket's offset, its load (``rate``), the window's error ratio and p95,
    and which limit it crossed.
    """
    if window < 1:
        raise InvalidArgument(f"window: {window} must be at least 1 bucket")
    ordered = sorted(buckets, key=lambda b: b.offset_seconds)
    for last in range(len(ordered)):
        first = max(0, last - window + 1)  # the first seconds: the window so far
        span = ordered[first : last + 1]
        scheduled = sum(b.scheduled for b in span)
        if not scheduled:
            continue
        failed = sum(sum(b.errors.values()) + b.dropped for b in span)
        ratio = failed / scheduled
        p95 = p95_of(first, last) if p95_of is not None and max_p95_ms else None
        crossed = [
            what
            for what, broken in (
                ("error_ratio", ratio > max_error_ratio),
                ("p95", p95 is not None and p95 > max_p95_ms),
            )
            if broken
        ]
        if crossed:
            at = ordered[last]
            return {
                "offset_seconds": at.offset_seconds,
                "rate": round(at.rate, 3),
                "error_ratio": round(ratio, 6),
                "p95_ms": None if p95 is None else round(p95, 3),
                "crossed": crossed,
            }
    return None


def amplification(
    response_before: float, response_during: float, rtt_before: float, rtt_during: float
) -> float:
    """Added response time / added round-trip time (same unit for each pair)."""
    added_rtt = rtt_during - rtt_before
    if added_rtt <= 0:
        raise InvalidArgument(
            f"the fault added no round-trip time ({rtt_before:g} -> {rtt_during:g}):"
            " no amplification to compute"
        )
    return (response_during - response_before) / added_rtt
