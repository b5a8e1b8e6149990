"""The one percentile definition of chaos_ext, for raw samples and for latency histograms.

**Definition** (Hyndman & Fan's type 7: numpy's default ``method="linear"``,
PromQL's ``quantile_over_time``, R's default, Excel's ``PERCENTILE.INC``):
sort the ``n`` values ``x[0] <= ... <= x[n-1]``; for ``q`` in [0, 100] let
``h = (n - 1) * q / 100``; the percentile is
``x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])``. So p0 is
the minimum, p100 the maximum, p50 the median, and a percentile of one value
is that value. No values: no percentile (None).

**Latency distributions** are HdrHistograms (:func:`new_latency_histogram`:
1 µs to 130 s, 3 significant digits), so a flood or a load at tens of
thousands of requests per second keeps counts, not samples, and histograms
from several workers or seconds merge exactly (percentiles are never
averaged). :func:`histogram_percentiles` applies the same definition to the
recorded values, each taken as the highest value its histogram bucket holds:
a result is never below the type-7 percentile of the exact samples and at
most 0.1 % above it.

Every percentile in probes, actions, reports, ``gameday compare`` and the
benchmarks comes from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from hdrh.histogram import HdrHistogram

__all__ = [
    "HIGHEST_US",
    "METHOD",
    "LatencyRecorder",
    "clipped_us",
    "histogram_of",
    "histogram_percentiles",
    "latency_summary_ms",
    "new_latency_histogram",
    "percentile",
    "percentiles",
    "prepare_folding",
]

METHOD = (
    "percentiles by linear interpolation between closest ranks (type 7: numpy's default,"
    " PromQL's quantile_over_time); latency histograms at 3 significant digits"
)
"""How reports and ``gameday compare`` state the definition."""
HIGHEST_US = 130_000_000  # the longest latency a histogram keeps exactly, in microseconds
_DIGITS = 3
_SUB_BUCKET_BITS = 11  # 3 significant digits: 2048 sub-buckets per power of two
_FOLD_EVERY = 65_536  # values a LatencyRecorder keeps before folding them into its histogram


def _check(q: float) -> float:
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0 <= q <= 100:
        raise ValueError(f"percentile {q!r} must be a number within [0, 100] (95 for p95)")
    return float(q)


def percentiles(values: Iterable[float], qs: Sequence[float]) -> dict[float, float | None]:
    """``{q: percentile}`` of ``values`` for each ``q`` in [0, 100] (type 7, see above)."""
    import numpy as np  # noqa: PLC0415 - numpy only when a percentile is computed

    wanted = [_check(q) for q in qs]
    data = np.asarray(list(values), dtype=float)
    if not data.size:
        return dict.fromkeys(wanted)
    found = np.percentile(data, wanted, method="linear")
    return {q: float(v) for q, v in zip(wanted, np.atleast_1d(found), strict=True)}


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values`` (type 7); None when there are none."""
    return percentiles(values, [q])[_check(q)]


def new_latency_histogram() -> HdrHistogram:
    """An empty latency histogram in microseconds (1 µs to 130 s, 3 significant digits)."""
    from hdrh.histogram import HdrHistogram  # noqa: PLC0415 - not for PromQL's percentiles

    return HdrHistogram(1, HIGHEST_US, _DIGITS)


def clipped_us(values: Sequence[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Microsecond values as an array, clipped to what a latency histogram holds."""
    import numpy as np  # noqa: PLC0415 - numpy only when a percentile is computed

    return np.clip(np.asarray(values, dtype=np.int64), 1, HIGHEST_US)


def histogram_of(values_us: Sequence[int]) -> HdrHistogram:
    """A latency histogram of ``values_us``, as if each had been recorded one by one.

    One vectorised pass instead of a ``record_value`` per value (about 5 µs
    each in Python): each value is reduced to the lowest value the histogram
    treats as equivalent (exact below 2048 µs, then the step doubles with each
    power of two), equal values are counted with numpy, and each distinct
    value is recorded once with its count. Values outside 1 µs..130 s are
    clipped to those bounds.
    """
    import numpy as np  # noqa: PLC0415 - numpy only when a percentile is computed

    hist = new_latency_histogram()
    if not len(values_us):
        return hist
    micros = clipped_us(values_us)
    _, exponent = np.frexp(micros.astype(np.float64))  # bit length of each value
    shift = np.maximum(exponent.astype(np.int64) - _SUB_BUCKET_BITS, 0)
    lowest = (micros >> shift) << shift
    distinct, counts = np.unique(lowest, return_counts=True)
    for value, count in zip(distinct.tolist(), counts.tolist(), strict=True):
        hist.record_value(value, count)
    return hist


def prepare_folding() -> None:
    """Import what folding needs (numpy) now, not inside a measured hot loop.

    A flood or load loop calls it before its clock starts: the first fold,
    after 65,536 values, would otherwise stall the loop for the import
    (about 0.3 s on this project's 2-core machines).
    """
    import numpy  # noqa: F401, PLC0415 - only warms the import cache


class LatencyRecorder:
    """Latencies with an O(1) hot path and bounded memory, read as one histogram.

    :meth:`add` appends integer microseconds to a list; every 65,536 values the
    list is folded into the HdrHistogram (:func:`histogram_of`). ``encode`` /
    ``decode`` carry it between processes; ``merge`` adds another recorder.
    """

    __slots__ = ("_hist", "_pending")

    def __init__(self, hist: HdrHistogram | None = None) -> None:
        self._hist = hist if hist is not None else new_latency_histogram()
        self._pending: list[int] = []

    def add(self, seconds: float) -> None:
        self._pending.append(int(seconds * 1e6))
        if len(self._pending) >= _FOLD_EVERY:
            self._fold()

    def _fold(self) -> None:
        if self._pending:
            self._hist.add(histogram_of(self._pending))
            self._pending = []

    def histogram(self) -> HdrHistogram:
        self._fold()
        return self._hist

    def merge(self, other: LatencyRecorder) -> None:
        self.histogram().add(other.histogram())

    def encode(self) -> str:
        """The histogram as HdrHistogram's compressed base64 text ("" when empty)."""
        hist = self.histogram()
        return hist.encode().decode() if hist.get_total_count() else ""

    @classmethod
    def decode(cls, text: str) -> LatencyRecorder:
        if not text:
            return cls()
        from hdrh.histogram import HdrHistogram  # noqa: PLC0415 - see new_latency_histogram

        recorder = cls()
        recorder._hist.add(HdrHistogram.decode(text))
        return recorder

    def summary_ms(self, qs: Sequence[float] = (50, 95, 99)) -> dict[str, float | None]:
        """``p<q>_ms`` for each ``q`` (``max_ms`` for 100) and ``mean_ms``; None when empty.

        Milliseconds rounded to microseconds; ``p99.9`` is named ``p99_9_ms``.
        """
        return latency_summary_ms(self.histogram(), qs)


def latency_summary_ms(
    hist: HdrHistogram, qs: Sequence[float] = (50, 95, 99), *, prefix: str = "", mean: bool = True
) -> dict[str, float | None]:
    """``<prefix>p<q>_ms`` of a µs histogram (``max_ms`` for q = 100), and ``mean_ms``."""
    found = histogram_percentiles(hist, qs)
    out = {f"{prefix}{_name(q)}_ms": _ms(v) for q, v in found.items()}
    if mean:
        out[f"{prefix}mean_ms"] = _ms(hist.get_mean_value()) if hist.get_total_count() else None
    return out


def _name(q: float) -> str:
    return "max" if q == 100 else f"p{q:g}".replace(".", "_")


def _ms(micros: float | None) -> float | None:
    return None if micros is None else round(micros / 1000, 3)


def histogram_percentiles(hist: HdrHistogram, qs: Sequence[float]) -> dict[float, float | None]:
    """``{q: percentile}`` of the values recorded in ``hist`` (its unit), type 7 like above.

    The values at the two ranks around ``h`` are found from the cumulative
    counts and interpolated; each is the highest value equivalent to its bucket.
    """
    import numpy as np  # noqa: PLC0415 - numpy only when a percentile is computed

    wanted = [_check(q) for q in qs]
    total = int(hist.get_total_count())
    if not total:
        return dict.fromkeys(wanted)
    cumulative = np.cumsum(np.ctypeslib.as_array(hist.counts)[: hist.counts_len])

    def at_rank(rank: int) -> float:  # 0-based rank among the sorted recorded values
        index = int(np.searchsorted(cumulative, rank + 1, side="left"))
        return float(hist.get_highest_equivalent_value(hist.get_value_from_index(index)))

    found: dict[float, float | None] = {}
    for q in wanted:
        h = (total - 1) * q / 100
        low = math.floor(h)
        value = at_rank(low)
        if h > low:
            value += (h - low) * (at_rank(min(low + 1, total - 1)) - value)
        found[q] = value
    return found
