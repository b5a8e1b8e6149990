"""``envelope.json``: what an envelope search ran and concluded (pure).

One record per run (magnitude, why it ran, outcome, its journal, the
hypothesis probes' measured values) and the conclusion, recomputed from the
records by :func:`chaos_ext._products.envelope.search.conclude` whenever it is read,
so a report or a gate never trusts a summary the runs do not support.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from chaos_ext._products.envelope.search import (
    COUNTED,
    Envelope,
    Observation,
    Search,
    Space,
    agreement,
    conclude,
    describe,
)
from chaos_ext._products.envelope.spec import EnvelopeSettings
from chaos_ext._runner.verdict import EXIT_DEVIATED, EXIT_FAILED, EXIT_HELD, EXIT_UNSTEADY

__all__ = [
    "DOCUMENT_KIND",
    "EXIT_BY_KIND",
    "document",
    "envelope_exit_code",
    "hypothesis_values",
    "is_envelope",
    "observations_of",
    "result_of",
    "search_of",
]

DOCUMENT_KIND = "gameday-envelope"
PHASES = ("before", "during", "after")
EXIT_BY_KIND = {
    "boundary": EXIT_HELD,
    "breaks-at-mild-end": EXIT_HELD,
    "holds-to-harsh-end": EXIT_HELD,
    "noisy": EXIT_DEVIATED,
    "incomplete": EXIT_FAILED,
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def measured(output: Any, tolerance: Any) -> float | None:
    """The number a tolerance judges: the output, its ``target`` key, or its ``value``."""
    if isinstance(output, Mapping):
        target = tolerance.get("target") if isinstance(tolerance, Mapping) else None
        key = target if isinstance(target, str) and target in output else "value"
        return _number(output.get(key))
    return _number(output)


def hypothesis_values(journal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every hypothesis check of a journal: probe, phase, measured value, met."""
    found: list[dict[str, Any]] = []
    states = journal.get("steady_states") or {}
    for phase in PHASES:
        block = states.get(phase) if isinstance(states, Mapping) else None
        blocks = block if isinstance(block, list) else [block] if block else []
        for item in blocks:
            for run in (item or {}).get("probes") or [] if isinstance(item, Mapping) else []:
                activity = run.get("activity") or {}
                tolerance = activity.get("tolerance")
                met = run.get("tolerance_met")
                found.append(
                    {
                        "probe": str(activity.get("name", "?")),
                        "phase": phase,
                        "value": measured(run.get("output"), tolerance),
                        "met": None if met is None else bool(met),
                        "status": str(run.get("status", "?")),
                    }
                )
    return found


def search_of(settings: Mapping[str, Any]) -> Search:
    """The search an ``envelope.json``'s ``settings`` describe."""
    space = Space(
        float(settings["low"]),
        float(settings["high"]),
        float(settings["resolution"]),
        bool(settings.get("relative")),
        bool(settings.get("integer")),
        settings.get("direction", "up"),
    )
    return Search(
        space,
        int(settings.get("repeats", 0)),
        int(settings.get("max_runs", 1)),
        int(settings.get("max_unsteady", 3)),
    )


def observations_of(runs: Sequence[Mapping[str, Any]]) -> list[Observation]:
    return [Observation(float(r["magnitude"]), str(r["outcome"]), r["phase"]) for r in runs]


def envelope_exit_code(envelope: Envelope) -> int:
    """0 an answer; 1 noisy; 2 incomplete (failed, aborted, interrupted, max-runs);
    4 stopped because the system was not steady."""
    if envelope.kind == "incomplete" and envelope.stopped and envelope.stopped.cause == "unsteady":
        return EXIT_UNSTEADY
    return EXIT_BY_KIND[envelope.kind]


def result_of(search: Search, runs: Sequence[Mapping[str, Any]], unit: str) -> dict[str, Any]:
    """The conclusion of ``runs`` as a JSON object."""
    envelope = conclude(search, observations_of(runs))
    return {
        "kind": envelope.kind,
        "held": envelope.held,
        "deviated": envelope.deviated,
        "summary": describe(envelope, search.space, unit),
        "agreement": agreement(envelope),
        "tallies": [
            {"magnitude": t.magnitude, "held": list(t.held), "deviated": list(t.deviated)}
            for t in envelope.tallies
        ],
        "noisy": [t.text() for t in envelope.noisy],
        "non_monotone": list(envelope.non_monotone),
        "stopped": (
            {"cause": envelope.stopped.cause, "reason": envelope.stopped.reason}
            if envelope.stopped
            else None
        ),
        "runs": envelope.runs,
        "counted": envelope.counted,
        "not_counted": [
            {"run": i, "magnitude": float(r["magnitude"]), "outcome": r["outcome"]}
            for i, r in enumerate(runs, start=1)
            if r["outcome"] not in COUNTED
        ],
        "exit_code": envelope_exit_code(envelope),
    }


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def document(
    settings: EnvelopeSettings,
    experiment_path: str,
    experiment: Mapping[str, Any],
    runs: Sequence[Mapping[str, Any]],
    status: str,
    started: float,
    ended: float | None = None,
    note: str = "",
) -> dict[str, Any]:
    """The whole ``envelope.json``."""
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    probes = [p for p in hypothesis.get("probes") or [] if isinstance(p, Mapping)]
    return {
        "kind": DOCUMENT_KIND,
        "version": 1,
        "status": status,
        "note": note,
        "experiment": {
            "title": str(experiment.get("title", "")),
            "path": experiment_path,
            "hypothesis_title": str(hypothesis.get("title", "")),
            "tolerances": {str(p.get("name")): p.get("tolerance") for p in probes},
        },
        "settings": settings.as_dict(),
        "worst_case_runs": settings.worst_case_runs,
        "started": _iso(started),
        "ended": _iso(ended),
        "runs": list(runs),
        "result": result_of(settings.search, runs, settings.unit),
    }


def is_envelope(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("kind") == DOCUMENT_KIND
