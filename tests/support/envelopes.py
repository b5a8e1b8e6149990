"""Envelope documents made by the real search core against an oracle (for reporting tests).

The search decisions are the real ones (chaos_ext._products.envelope.search); only the
runs' outcomes come from ``oracle(magnitude, run number)`` instead of a system,
and the measured value from ``value(magnitude, outcome)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos_ext._products.envelope.document import document, observations_of
from chaos_ext._products.envelope.search import Step, next_step
from chaos_ext._products.envelope.spec import rendered, settings_from

EXPERIMENT = {
    "title": "checkout answers while the database is slow",
    "steady-state-hypothesis": {
        "title": "p95 under 300 ms",
        "probes": [{"name": "p95-ms", "tolerance": {"type": "range", "range": [0, 300]}}],
    },
}


def threshold(at: float, direction: str = "up") -> Callable[[float, int], str]:
    if direction == "up":
        return lambda m, _n: "deviated" if m >= at else "held"
    return lambda m, _n: "deviated" if m <= at else "held"


def write_envelope(
    folder: Path,
    oracle: Callable[[float, int], str],
    settings: dict[str, Any],
    value: Callable[[float, str], float] = lambda m, o: 500.0 if o == "deviated" else m / 4,
) -> Path:
    """Run the search against ``oracle``; write ``folder/envelope.json``; return it."""
    spec = settings_from(EXPERIMENT, settings, folder.name)
    runs: list[dict[str, Any]] = []
    while isinstance(step := next_step(spec.search, observations_of(runs)), Step):
        outcome = oracle(step.magnitude, len(runs) + 1)
        runs.append(
            {
                "run": len(runs) + 1,
                "magnitude": step.magnitude,
                "value": rendered(spec, step.magnitude),
                "phase": step.phase,
                "why": step.why,
                "outcome": outcome,
                "exit_code": {"held": 0, "deviated": 1}.get(outcome, 2),
                "journal": "",
                "duration_s": 1.0,
                "hypothesis": [
                    {"probe": "p95-ms", "phase": "before", "value": 20.0, "met": True},
                    {
                        "probe": "p95-ms",
                        "phase": "after",
                        "value": value(step.magnitude, outcome),
                        "met": outcome == "held",
                    },
                ],
            }
        )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "envelope.json"
    path.write_text(json.dumps(document(spec, "exp.json", EXPERIMENT, runs, "finished", 0, 1)))
    return path
