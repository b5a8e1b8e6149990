"""Reading a Chaos Toolkit journal defensively (pure): times, lists, steady states.

A report reads journals from anywhere (older gameday, plain ``chaos run``,
hand-edited): nothing here raises on a missing or odd-typed field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["epoch", "error_line", "mappings", "number", "probe_runs", "states"]


def epoch(value: Any) -> float | None:
    """Epoch seconds from a number or an ISO 8601 time (naive: UTC); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    return None


def mappings(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a journal list (anything else, or a non-list, gives none)."""
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def states(journal: Mapping[str, Any], phase: str) -> list[Mapping[str, Any]]:
    """chaoslib's steady-state results of ``phase`` (before/after: one; during: a list)."""
    block = (journal.get("steady_states") or {}).get(phase)
    if isinstance(block, Mapping):
        return [block]
    return mappings(block)


def probe_runs(journal: Mapping[str, Any], phase: str) -> list[Mapping[str, Any]]:
    """Every probe run of the steady states of ``phase``."""
    return [run for state in states(journal, phase) for run in mappings(state.get("probes"))]


def error_line(run: Mapping[str, Any]) -> str:
    """The last line of an activity run's exception ("" when it has none)."""
    error = run.get("exception")
    if not isinstance(error, list | tuple):
        return str(error) if error else ""
    lines = [str(x).strip() for x in error if str(x).strip()]
    return lines[-1] if lines else ""


def number(value: Any) -> float | None:
    """A finite float from a number (a bool is not one); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
