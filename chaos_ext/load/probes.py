"""Load probes: judge a load's error ratio and latency over a time window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos_ext._core.contract import LEDGER_ID, Configuration, Secrets
from chaos_ext._core.validation import validated_by
from chaos_ext.errors import InvalidArgument, LoadError
from chaos_ext.load import _distributed, _locate, _recorded
from chaos_ext.load.driver import load_meta, load_results
from chaos_ext.load.spec import spec_from_arguments

__all__ = ["load_window_stats"]


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
