"""A worker's counts for one time bucket, cheap to update per response.

The hot path only appends latencies (integer µs) to two lists and bumps
counters. When the bucket is written, the lists become HdrHistograms in one
vectorised pass (:func:`chaos_ext._core.percentile.histogram_of`): the same
histogram as recording every value one by one (a test checks it), at a
fraction of the CPU: a load generator's capacity is its CPU per request.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from chaos_ext._core.percentile import clipped_us, histogram_of
from chaos_ext.load.results import LE_BOUNDS

__all__ = ["BucketAccumulator"]

_LE_US = np.array([round(b * 1e6) for b in LE_BOUNDS], dtype=np.int64)
_STATUS_KEYS = ("0xx", "1xx", "2xx", "3xx", "4xx", "5xx")


def _encode(hist: HdrHistogram) -> str:
    return hist.encode().decode() if hist.get_total_count() else ""


class BucketAccumulator:
    """One worker's counts for one bucket while its requests are in flight."""

    __slots__ = (
        "answered",
        "causes",
        "dropped",
        "errors",
        "index",
        "last_done",
        "latencies",
        "max_lag",
        "ok",
        "pending",
        "seconds",
        "sent",
        "services",
        "start",
        "status",
        "worker",
    )

    def __init__(self, index: int, start: float, seconds: float, worker: int) -> None:
        self.index, self.start, self.seconds, self.worker = index, start, seconds, worker
        self.sent = self.dropped = self.ok = self.pending = 0
        self.answered = 0  # requests of any bucket that ended during this one's wall-clock time
        self.errors: dict[str, int] = {}
        self.causes: dict[str, int] = {}  # the cause header's values on 5xx responses
        self.status = [0] * len(_STATUS_KEYS)
        self.latencies: list[int] = []  # µs from the scheduled send time
        self.services: list[int] = []  # µs from the actual send
        self.max_lag = 0.0
        self.last_done = 0.0  # seconds after the load's start of the latest completion

    def response(self, status: int, latency: float, service: float, cause: str | None) -> None:
        """A response came ``latency`` s after its scheduled time, ``service`` s after sending.

        ``cause``: the value of the load's cause header, if it has one (counted on 5xx only).
        """
        cls = status // 100
        self.status[cls if 0 < cls < 6 else 0] += 1
        if cls == 5:
            self.error("http_5xx")
            if cause:
                self.causes[cause] = self.causes.get(cause, 0) + 1
        elif cls == 4:
            self.error("http_4xx")
        else:
            self.ok += 1
        self.latencies.append(int(latency * 1e6))
        self.services.append(int(service * 1e6))

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def to_line(self) -> dict[str, Any]:
        """The JSON line written for this bucket (histograms encoded)."""
        le = [0] * (len(LE_BOUNDS) + 1)
        lat_sum = 0.0
        if self.latencies:
            micros = clipped_us(self.latencies)
            le = np.bincount(np.searchsorted(_LE_US, micros), minlength=len(le)).tolist()
            lat_sum = float(micros.sum()) / 1e6
        return {
            "i": self.index,
            "t": self.start,
            "s": self.seconds,
            "w": self.worker,
            "sent": self.sent,
            "dropped": self.dropped,
            "ok": self.ok,
            "errors": self.errors,
            "causes": self.causes,
            "answered": self.answered,
            "status": {k: n for k, n in zip(_STATUS_KEYS, self.status, strict=True) if n},
            "lat_sum": round(lat_sum, 6),
            "max_lag_ms": round(self.max_lag * 1000, 3),
            "le": le,
            "last_done_seconds": round(self.last_done, 6),
            "hist": _encode(histogram_of(self.latencies)),
            "svc": _encode(histogram_of(self.services)),
        }
