"""Journals for `gameday compare` tests: runs with a fault window, PromQL probes and a
recorded timeline (``gameday.timeline``, built as the runner builds it).

A run settles, injects one fault (a ledger entry on at ``fault_at``, off
``fault_s`` later), and its method probes record ``[t, v]`` series (a
``query_series`` output, with its PromQL) or single values; the timeline the
runner would store is built from the journal by the product's own
``build_timeline`` (the same function the runner calls).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos_ext._core.timeline import build_timeline
from support.journals import JournalBuilder

__all__ = ["P95_EXPR", "RATIO_EXPR", "Probe", "window_journal"]

_BUCKETS = 'http_request_duration_seconds_bucket{job="app"}'
P95_EXPR = f"histogram_quantile(0.95, sum by (le) (rate({_BUCKETS}[5s])))"
RATIO_EXPR = (
    'sum(rate(http_requests_total{job="app", code=~"5.."}[5s]) or vector(0))'
    ' / sum(rate(http_requests_total{job="app"}[5s]))'
)


@dataclass(frozen=True)
class Probe:
    """A method probe: ``points`` ``(seconds from the run's start, value)``; a PromQL
    ``query_series`` when ``expr`` is given (recorded at ``at``), else one value."""

    name: str
    points: Sequence[tuple[float, float]]
    expr: str | None = None
    at: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def _promql(probe: Probe) -> dict[str, Any]:
    return {
        "type": "python",
        "module": "chaos_ext.prometheus.probes",
        "func": "query_series",
        "arguments": {"expr": probe.expr, "window_seconds": 120, "step_seconds": 1},
    }


def window_journal(
    title: str,
    *,
    start: float,
    fault_at: float,
    fault_s: float,
    probes: Sequence[Probe] = (),
    recover_s: float | None = None,
    prometheus_url: str = "http://127.0.0.1:9",
    hypothesis: Mapping[str, Any] | None = None,
    before_checks: Sequence[tuple[float, Any]] = (),
) -> dict[str, Any]:
    """One run's journal (module docstring); ``hypothesis`` ``{probe: tolerance}``."""
    b = JournalBuilder(title, dict(hypothesis or {"app-answers": True}), start=start)
    name = next(iter(hypothesis or {"app-answers": True}))
    for at, value in before_checks or [(fault_at - 0.5, True)]:
        b.check("before", name, value, at)
    b.activity("inject", fault_at, 0.05, {"ledger_id": "0"})
    b.fault("netem", "netns:app/eth0", fault_at + 0.01, fault_at + fault_s)
    for probe in probes:
        at = probe.at if probe.at is not None else max(t for t, _ in probe.points)
        output: Any = (
            {"expr": probe.expr, "series": [[start + t, v] for t, v in probe.points]}
            if probe.expr
            else probe.points[0][1]
        )
        b.activity(probe.name, at, 0.01, output, kind="probe")
        if probe.expr:
            b.experiment["method"][-1]["provider"] = _promql(probe)
            b.runs[-1]["activity"]["provider"] = _promql(probe)
    b.activity("undo", fault_at + fault_s - 0.05, 0.05, {"undone": 1}, rollback=True)
    if recover_s is not None:
        b.recovery(fault_at + fault_s, 60, recover_s)
    b.experiment["configuration"] = {"prometheus_url": prometheus_url, "app_job": "app"}
    journal = b.build()
    journal["gameday"]["timeline"] = build_timeline(copy.deepcopy(journal)).as_dict()
    return journal
