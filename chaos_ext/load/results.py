"""Per-bucket load results: recorded by workers, merged and summarised by readers.

Each worker process appends one JSON line per time bucket (default 1 s) to
``<results_dir>/worker-<i>.jsonl`` once every request scheduled in that bucket
has completed or timed out. A request belongs to the bucket of its *scheduled*
send time (``sent``, ``dropped``, ``ok``, ``errors``, latencies), and its
latency is measured from that scheduled time, so requests a slow server kept
waiting show up with their full delay. ``answered`` counts instead the
requests that *ended* during the bucket's wall-clock time: ``achieved_rate``
(answered per second) is what the target really delivered, next to
``scheduled_rate``; buckets after the schedule may hold only late answers.

Latencies go into an HdrHistogram (1 µs to 130 s, 3 significant digits; see
``_bucket`` for how workers fill it): the tail is kept, and buckets from
several workers or over a window are merged histogram by histogram
(percentiles are never averaged). The encoded histogram travels in each line
(a few hundred bytes).

Error kinds: ``connect`` (refused, reset, unreachable), ``dns``, ``timeout``,
``http_4xx``, ``http_5xx``, ``other``; requests the concurrency cap could not
take are counted as ``dropped`` (the generator never delays its schedule).
With the load's ``cause_header``, ``causes`` counts the values that header
carried on 5xx responses (why the server failed, in its own words; local
loads only: a Job's pods do not push them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from chaos_ext._core.percentile import latency_summary_ms, new_latency_histogram

__all__ = [
    "ERROR_KINDS",
    "LE_BOUNDS",
    "MergedBucket",
    "bucket_view",
    "merge_lines",
    "read_buckets",
    "read_lines",
    "summarize",
]

ERROR_KINDS = ("connect", "dns", "timeout", "http_4xx", "http_5xx", "other")
# Prometheus histogram bucket bounds (seconds) for the optional /metrics exposition.
LE_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9, 100.0)


@dataclass
class MergedBucket:
    """All workers' counts for one bucket."""

    index: int
    start: float
    seconds: float
    sent: int = 0
    answered: int = 0
    dropped: int = 0
    ok: int = 0
    max_lag_ms: float = 0.0
    last_done_seconds: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    status: dict[str, int] = field(default_factory=dict)
    causes: dict[str, int] = field(default_factory=dict)
    hist: HdrHistogram = field(default_factory=new_latency_histogram, repr=False)
    svc: HdrHistogram = field(default_factory=new_latency_histogram, repr=False)
    workers: int = 0

    def add(self, line: dict[str, Any]) -> None:
        self.sent += line["sent"]
        self.answered += line.get("answered", 0)
        self.dropped += line["dropped"]
        self.ok += line["ok"]
        self.max_lag_ms = max(self.max_lag_ms, line["max_lag_ms"])
        self.last_done_seconds = max(self.last_done_seconds, line.get("last_done_seconds", 0.0))
        pairs = (
            (self.errors, line["errors"]),
            (self.status, line["status"]),
            (self.causes, line.get("causes") or {}),
        )
        for target, source in pairs:
            for key, count in source.items():
                target[key] = target.get(key, 0) + count
        if line["hist"]:
            self.hist.decode_and_add(line["hist"])
        if line.get("svc"):
            self.svc.decode_and_add(line["svc"])
        self.workers += 1


def read_lines(results_dir: Path) -> list[dict[str, Any]]:
    """Every complete bucket line of every worker (a half-written last line is skipped)."""
    lines = []
    for path in sorted(results_dir.glob("worker-*.jsonl")):
        for raw in path.read_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError:
                continue
    return lines


def merge_lines(lines: Iterable[dict[str, Any]]) -> list[MergedBucket]:
    """Merge lines of the same bucket index across workers; ordered by time."""
    merged: dict[int, MergedBucket] = {}
    for line in lines:
        bucket = merged.get(line["i"])
        if bucket is None:
            bucket = merged[line["i"]] = MergedBucket(line["i"], line["t"], line["s"])
        bucket.add(line)
    return [merged[i] for i in sorted(merged)]


def read_buckets(results_dir: Path) -> list[MergedBucket]:
    """The merged buckets recorded so far in ``results_dir``."""
    return merge_lines(read_lines(results_dir))


def _latency(hist: HdrHistogram) -> dict[str, float | None]:
    """Latency from the scheduled send: p50 ... p99.9 and max (``chaos_ext._core.percentile``)."""
    return latency_summary_ms(hist, _PERCENTILES, mean=False)


def _service(hist: HdrHistogram) -> dict[str, float | None]:
    """Latency from the actual send (what a closed-loop tool such as wrk reports)."""
    return latency_summary_ms(hist, (50.0, 99.0), prefix="service_", mean=False)


def _counts(buckets: Sequence[MergedBucket], seconds: float) -> dict[str, Any]:
    sent = sum(b.sent for b in buckets)
    answered = sum(b.answered for b in buckets)
    dropped = sum(b.dropped for b in buckets)
    ok = sum(b.ok for b in buckets)
    errors = {kind: sum(b.errors.get(kind, 0) for b in buckets) for kind in ERROR_KINDS}
    status: dict[str, int] = {}
    causes: dict[str, int] = {}
    for b in buckets:
        for key, count in b.status.items():
            status[key] = status.get(key, 0) + count
        for key, count in b.causes.items():
            causes[key] = causes.get(key, 0) + count
    scheduled = sent + dropped
    failed = sum(errors.values()) + dropped
    return {
        "scheduled": scheduled,
        "sent": sent,
        "answered": answered,
        "dropped": dropped,
        "ok": ok,
        "errors": errors,
        "status": dict(sorted(status.items())),
        "causes": dict(sorted(causes.items())),
        "error_ratio": round(failed / scheduled, 6) if scheduled else None,
        "scheduled_rate": round(scheduled / seconds, 3) if seconds else None,
        "achieved_rate": round(answered / seconds, 3) if seconds else None,
        "max_lag_ms": max((b.max_lag_ms for b in buckets), default=0.0),
        "last_done_seconds": max((b.last_done_seconds for b in buckets), default=0.0),
    }


def bucket_view(bucket: MergedBucket, origin: float) -> dict[str, Any]:
    """One bucket as it goes in a journal (no histogram encoding)."""
    return {
        "t": bucket.start,
        "offset_seconds": round(bucket.start - origin, 3),
        **_counts([bucket], bucket.seconds),
        **_latency(bucket.hist),
        **_service(bucket.svc),
    }


def summarize(
    buckets: Sequence[MergedBucket], *, origin: float, include_buckets: bool = True
) -> dict[str, Any]:
    """Totals, error ratio and merged latency percentiles over ``buckets``."""
    merged, service = new_latency_histogram(), new_latency_histogram()
    for bucket in buckets:
        merged.add(bucket.hist)
        service.add(bucket.svc)
    # seconds of the schedule: a bucket after it that only holds late answers adds none
    scheduled = [b for b in buckets if b.sent + b.dropped]
    seconds = sum(b.seconds for b in scheduled or buckets)
    summary: dict[str, Any] = {
        "buckets_count": len(buckets),
        "seconds": round(seconds, 3),
        **_counts(buckets, seconds),
        **_latency(merged),
        **_service(service),
        "summarized_at": time.time(),
    }
    if include_buckets:
        summary["buckets"] = [bucket_view(b, origin) for b in buckets]
    return summary
