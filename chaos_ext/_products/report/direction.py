"""Which way is better for a metric, from what it means (pure, but for the catalog).

In order, the first that knows wins:

1. ``--better NAME=lower|higher`` (the user);
2. the probe catalog: a metric named like a catalog probe (or a check calling
   one) takes the probe's ``better`` (declared, or implied by its tolerance:
   an upper bound means lower is better);
3. the probe's tolerance in the experiment (:func:`direction_of_tolerance`);
4. the metric's name: errors, latency, drops, refusals, timeouts, failures and
   their kin are better lower; successes, headroom, hits, readiness and
   throughput are better higher.

Only a metric none of these speaks for is ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from chaos_ext._products.report.series import as_number
from chaos_ext.prometheus.catalogs import default_catalog

__all__ = ["better_of", "direction_of_name", "direction_of_tolerance"]

_HUGE = 1e300
LOWER_WORDS = frozenset(
    {
        "error",
        "errors",
        "err",
        "latency",
        "latencies",
        "p50",
        "p90",
        "p95",
        "p99",
        "p999",
        "drop",
        "drops",
        "dropped",
        "refused",
        "refusal",
        "refusals",
        "reject",
        "rejected",
        "timeout",
        "timeouts",
        "fail",
        "fails",
        "failed",
        "failure",
        "failures",
        "nxdomain",
        "servfail",
        "restart",
        "restarts",
        "denied",
        "5xx",
        "4xx",
        "duration",
        "seconds",
        "ms",
        "wait",
        "queue",
        "backlog",
        "lag",
        "miss",
        "misses",
        "overflow",
        "pressure",
        "missing",
        "unavailable",
        "notready",
        "deviation",
        "stall",
        "stalls",
        "throttled",
        "oom",
        "evicted",
        "pending",
        "exhausted",
        "getaddrinfo",
        "slow",
        "rtt",
        "delay",
        "processes",
        "children",
        "drift",
        "stuck",
    }
)
HIGHER_WORDS = frozenset(
    {
        "success",
        "successes",
        "ok",
        "availability",
        "available",
        "ready",
        "headroom",
        "free",
        "throughput",
        "qps",
        "rps",
        "hit",
        "hits",
        "healthy",
        "up",
        "held",
        "answered",
        "served",
        "capacity",
        "slots",
        "converges",
        "converged",
    }
)


def direction_of_tolerance(tolerance: Any) -> str | None:
    """``lower`` / ``higher`` from a Chaos Toolkit tolerance on the probe's output.

    A range from 0 (or below) up to a limit, or 0, or false: lower; a range open
    upwards, a range ending at 1 (a ratio), or true: higher.
    """
    if isinstance(tolerance, bool):
        return "higher" if tolerance else "lower"
    if isinstance(tolerance, int | float):
        return "lower" if tolerance == 0 else None
    if isinstance(tolerance, Mapping) and tolerance.get("type") == "range":
        bounds = [*(tolerance.get("range") or []), None, None]
        low, high = as_number(bounds[0]), as_number(bounds[1])
        if high is None or high >= _HUGE:
            return "higher"
        if low is None or low <= 0:
            return "lower"
        if high == 1:
            return "higher"
    return None


def direction_of_name(name: str) -> str | None:
    """``lower`` / ``higher`` from the words of a metric's name (None: they do not say)."""
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    lower, higher = bool(words & LOWER_WORDS), bool(words & HIGHER_WORDS)
    if lower and not higher:
        return "lower"
    if higher and not lower:
        return "higher"
    if lower and higher:  # "error-free", "refused-slots": the qualifier decides
        return "higher" if words & {"free", "headroom", "ok", "success"} else "lower"
    return None


@lru_cache(maxsize=1)
def _catalog_directions() -> dict[str, str]:
    return {name: probe.better for name, probe in default_catalog().probes.items()}


def better_of(
    name: str, tolerance: Any, overrides: Mapping[str, str], catalog_names: Iterable[str] = ()
) -> tuple[str | None, str]:
    """``(direction, where it came from)`` for the metric ``name``."""
    if name in overrides:
        return overrides[name], "--better"
    catalog = _catalog_directions()
    for candidate in (name, *catalog_names):
        if candidate in catalog:
            return catalog[candidate], "catalog"
    from_tolerance = direction_of_tolerance(tolerance)
    if from_tolerance:
        return from_tolerance, "tolerance"
    from_name = direction_of_name(name)
    if from_name:
        return from_name, "name"
    return None, "unknown"
