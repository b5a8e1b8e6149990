"""Load probes: judge a load's error ratio and latency over a time window."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaos_ext._core.contract import LEDGER_ID, Configuration, Secrets
from chaos_ext._core.percentile import histogram_percentiles, new_latency_histogram
from chaos_ext._core.validation import require_range, validated_by
from chaos_ext.errors import InvalidArgument
from chaos_ext.load import _distributed, _locate, _recorded
from chaos_ext.load.driver import load_meta, load_results
from chaos_ext.load.errors import LoadError
from chaos_ext.load.onset import DEFAULT_CLASSES, BucketCounts, breaking_point, error_classes
from chaos_ext.load.results import MergedBucket, read_buckets
from chaos_ext.load.spec import spec_from_arguments

__all__ = ["error_onset", "load_window_stats"]


def _window(
    meta: dict[str, Any],
    run_id: str,
    fault_kind: str,
    fault_target: str,
    begin: float,
    end: float,
) -> tuple[float, float | None]:
    if fault_kind:
        if begin or end:
            raise InvalidArgument("give either fault_kind or from_seconds/to_seconds, not both")
        return _locate.fault_window(fault_kind, fault_target, run_id)
    if begin < 0 or end < 0 or (end and end <= begin):
        raise InvalidArgument(f"from_seconds/to_seconds: [{begin:g}, {end:g}] is not a window")
    start = float(meta["start"])
    return start + begin, (start + end) if end else None


def _baseline(urls: list[str], rate: float, seconds: float) -> dict[str, Any]:
    spec = spec_from_arguments(
        {
            "urls": urls,
            "rate": rate,
            "duration_seconds": seconds,
            "name": "baseline",
            "processes": 1,
        }
    )
    entry, load = _recorded.start_recorded(spec, module="chaos_ext.load.actions")
    summary = _recorded.finish(entry, load, spec)
    summary[LEDGER_ID] = entry.id
    summary["baseline"] = True
    return summary


@validated_by()
def load_window_stats(
    name: str = "",
    ledger_id: str = "",
    fault_kind: str = "",
    fault_target: str = "",
    from_seconds: float = 0.0,
    to_seconds: float = 0.0,
    baseline_urls: list[str] | None = None,
    baseline_rate: float = 10.0,
    baseline_seconds: float = 5.0,
    include_buckets: bool = True,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Error ratio, achieved rate and latency percentiles of a load over a window.

    The load is the one ``drive_http_load`` started with that ``name`` or
    ``ledger_id`` (both empty: this run's latest). The window is the span of
    the latest ledger fault of kind ``fault_kind`` (optionally on a target
    containing ``fault_target``) in the load's run, or ``[from_seconds,
    to_seconds)`` after the load's start (``to_seconds`` 0: up to now), or
    the whole load. Buckets whose middle falls in the window count.
    Returns ``error_ratio`` ((errors + dropped) / scheduled), ``achieved_rate``,
    ``p50_ms``/``p95_ms``/``p99_ms``/``max_ms`` (from the scheduled send time,
    merged histograms), ``errors`` by kind and the per-second ``buckets``.
    Judge it with a range tolerance and ``target``, e.g. ``{"type": "range",
    "range": [0, 0.01], "target": "error_ratio"}``.

    In a steady-state hypothesis the check before the method finds no load of
    this run yet: with ``baseline_urls`` it then measures a short baseline
    load itself (``baseline_rate`` req/s for ``baseline_seconds``, recorded in
    the ledger) and judges that; without, it fails. Otherwise read-only. Fails
    when no request was scheduled in the window (nothing to judge).
    """
    entry = _locate.find_load(
        ledger_id or name, required=not baseline_urls, this_run=bool(baseline_urls)
    )
    if entry is None:
        return _baseline(list(baseline_urls or []), baseline_rate, baseline_seconds)
    results_dir = Path(entry.recipe.get("results_dir", ""))
    if entry.recipe.get("mode") == "kubernetes" and not entry.recipe.get("forgotten"):
        _distributed.sync(entry)  # the pods' results so far, from the Pushgateway
    meta = load_meta(results_dir)
    start, end = _window(meta, entry.run_id, fault_kind, fault_target, from_seconds, to_seconds)
    summary = load_results(results_dir, start=start, end=end, include_buckets=include_buckets)
    if not summary["scheduled"]:
        raise LoadError(
            f"no request of load {entry.id} was scheduled in the window "
            f"[{start:.1f}, {summary['window']['end']:.1f}]: nothing to judge"
        )
    summary[LEDGER_ID] = entry.id
    return summary


def _check_onset(arguments: Mapping[str, Any]) -> None:
    classes = arguments.get("classes")
    if classes is not None and (
        not isinstance(classes, dict)
        or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in classes.items())
    ):
        raise InvalidArgument(
            f"classes: expected a mapping of raw cause to class name, got {classes!r}"
            ' (e.g. {"db-connect": "db-refused"})'
        )
    require_range("min_errors", arguments.get("min_errors", 1), 1, 1_000_000)
    require_range("max_error_ratio", arguments.get("max_error_ratio", 0.01), 0, 1)
    require_range("max_p95_seconds", arguments.get("max_p95_seconds", 0.0), 0, 3600)
    require_range("window_seconds", arguments.get("window_seconds", 5.0), 0.1, 3600)


def _p95_of(buckets: list[MergedBucket]) -> Any:
    def p95(first: int, last: int) -> float | None:
        merged = new_latency_histogram()
        for bucket in buckets[first : last + 1]:
            merged.add(bucket.hist)
        if not merged.get_total_count():
            return None
        micros = histogram_percentiles(merged, (95.0,))[95.0]
        return None if micros is None else micros / 1000.0

    return p95


@validated_by(_check_onset)
def error_onset(
    name: str = "",
    ledger_id: str = "",
    classes: dict[str, str] | None = None,
    min_errors: int = 1,
    max_error_ratio: float = 0.01,
    max_p95_seconds: float = 0.0,
    window_seconds: float = 5.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Errors of a load by cause, each with the load at which it began, and the breaking point.

    The load is the one ``drive_http_load`` started with that ``name`` or
    ``ledger_id`` (both empty: this run's latest); start it with a ramp and a
    ``cause_header`` so that 5xx carry the server's cause. Each raw cause or
    error kind is folded into a class (``classes`` adds to or overrides
    ``chaos_ext.load.onset.DEFAULT_CLASSES``: ``db-connect`` -> ``db-refused``,
    ``dns`` -> ``dns``, ``timeout`` and ``dropped`` -> ``upstream-timeout``).
    A class's onset is the first second of scheduled time with at least
    ``min_errors`` of its errors; ``onset_rate`` is the load scheduled in
    that second (req/s), ``share`` its part of all errors. The breaking point
    is the first second whose trailing ``window_seconds`` have an error
    ratio above ``max_error_ratio`` (or, with ``max_p95_seconds`` > 0, a p95
    above it); ``held_to_rate`` is the peak load when it never broke.
    Read-only. Fails when the load scheduled nothing yet.
    """
    entry = _locate.find_load(ledger_id or name)
    assert entry is not None  # noqa: S101 - find_load(required=True) raises instead
    results_dir = Path(entry.recipe.get("results_dir", ""))
    meta = load_meta(results_dir)
    merged = [b for b in read_buckets(results_dir) if b.sent + b.dropped]
    if not merged:
        raise LoadError(f"load {entry.id} has scheduled no request yet: nothing to classify")
    counts = [BucketCounts.from_merged(b, float(meta["start"])) for b in merged]
    folded = {**DEFAULT_CLASSES, **(classes or {})}
    onsets = error_classes(counts, folded, int(min_errors))
    window = max(1, math.ceil(window_seconds / merged[0].seconds - 1e-9))
    broke = breaking_point(
        counts,
        max_error_ratio=max_error_ratio,
        window=window,
        p95_of=_p95_of(merged),
        max_p95_ms=max_p95_seconds * 1000,
    )
    peak = max(b.rate for b in counts)
    return {
        LEDGER_ID: entry.id,
        "scheduled": sum(b.scheduled for b in counts),
        "errors": sum(c.count for c in onsets),
        "peak_rate": round(peak, 3),
        "classes": [c.as_dict() for c in onsets],
        "breaking_point": broke,
        "held_to_rate": None if broke else round(peak, 3),
        "slo": {
            "max_error_ratio": max_error_ratio,
            "max_p95_seconds": max_p95_seconds,
            "window_seconds": window_seconds,
        },
        "min_errors": min_errors,
    }
