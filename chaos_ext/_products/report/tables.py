"""Rows of the report's tables, shared by the HTML and Markdown renderings (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext._products.report.model import Activity, Check, RunView
from chaos_ext._products.report.series import as_number

__all__ = [
    "ActivityRow",
    "Cell",
    "LedgerRow",
    "ProbeRow",
    "activity_rows",
    "compact",
    "ledger_rows",
    "probe_rows",
    "tolerance_text",
    "value_text",
]

_LIMIT = 160


@dataclass(frozen=True)
class Cell:
    """A value and whether it was within tolerance (None: not evaluated)."""

    text: str
    ok: bool | None


@dataclass(frozen=True)
class ProbeRow:
    probe: str
    tolerance: str
    before: Cell
    during: Cell
    after: Cell


@dataclass(frozen=True)
class ActivityRow:
    name: str
    kind: str
    status: str
    at: str
    duration: str
    output: str
    ok: bool


@dataclass(frozen=True)
class LedgerRow:
    kind: str
    target: str
    injected: str
    undone: str
    state: str
    note: str


def compact(value: Any, limit: int = _LIMIT) -> str:
    """One line of JSON (or the string itself), cut at ``limit`` characters."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_text(value: Any) -> str:
    """A measured value for a table: numbers to 4 significant digits, bools lowercase."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"{value:.4g}"
    return compact(value, 80)


def tolerance_text(tolerance: Any) -> str:
    """A Chaos Toolkit tolerance as a short condition."""
    if isinstance(tolerance, bool | int | float):
        return f"== {value_text(tolerance)}"
    if isinstance(tolerance, str):
        return f'== "{tolerance}"'
    if isinstance(tolerance, list):
        return f"in {compact(tolerance, 60)}"
    if isinstance(tolerance, Mapping) and tolerance.get("type") == "range":
        low, high = (tolerance.get("range") or [None, None])[:2]
        return f"in [{value_text(low)}, {value_text(high)}]"
    return compact(tolerance, 80)


def _cell(checks: list[Check]) -> Cell:
    if not checks:
        return Cell("—", None)
    if len(checks) == 1:
        check = checks[0]
        text = value_text(check.output) if check.status != "failed" else f"error: {check.error}"
        return Cell(text, check.met)
    met = [c for c in checks if c.met]
    numbers = [
        n
        for n in (as_number(c.output) for c in checks if not isinstance(c.output, bool))
        if n is not None
    ]
    spread = f", {min(numbers):.4g}…{max(numbers):.4g}" if numbers else ""
    breaches = len(checks) - len(met)
    return Cell(f"{len(checks)} checks, {breaches} out of tolerance{spread}", breaches == 0)


def probe_rows(view: RunView) -> list[ProbeRow]:
    """One row per hypothesis probe: before / during / after."""
    names = list(view.hypothesis_probes)
    names += sorted({c.probe for c in view.checks} - set(names))
    return [
        ProbeRow(
            probe=name,
            tolerance=tolerance_text(view.tolerances.get(name)),
            before=_cell(view.checks_for(name, "before")),
            during=_cell(view.checks_for(name, "during")),
            after=_cell(view.checks_for(name, "after")),
        )
        for name in names
    ]


def _offset(at: float | None, origin: float | None) -> str:
    if at is None or origin is None:
        return ""
    return f"+{at - origin:.1f} s"


def _activity_row(act: Activity, origin: float | None) -> ActivityRow:
    duration = act.duration
    output = compact(act.output) if act.status != "failed" else f"error: {act.error or ''}"
    return ActivityRow(
        name=act.name,
        kind=act.kind + (" (background)" if act.background else ""),
        status=act.status if act.failure is None else f"failed ({act.failure})",
        at=_offset(act.start, origin),
        duration=f"{duration:.2f} s" if duration is not None else "",
        output=output,
        ok=act.failure is None,
    )


def activity_rows(activities: tuple[Activity, ...], origin: float | None) -> list[ActivityRow]:
    return [_activity_row(a, origin) for a in activities]


def ledger_rows(view: RunView) -> list[LedgerRow]:
    """The faults this run recorded, with when they were injected and undone."""
    notes = {str(s.get("id")): str(s.get("note") or "") for s in view.sweep}
    rows = []
    for entry in view.ledger:
        note = str(entry.get("note") or entry.get("last_error") or "")
        if str(entry.get("id")) in notes:
            note = f"swept: {notes[str(entry['id'])]}"
        rows.append(
            LedgerRow(
                kind=str(entry.get("kind", "")),
                target=str(entry.get("target", "")),
                injected=_offset(as_number(entry.get("created_at")), view.start),
                undone=_offset(as_number(entry.get("closed_at")), view.start) or "not undone",
                state=str(entry.get("state", "")),
                note=note,
            )
        )
    return rows
