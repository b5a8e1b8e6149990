"""Rows of the report's tables, shared by the HTML and Markdown renderings (pure).

The hypothesis table has one column per window of the run's timeline that was
measured (:data:`chaos_ext._core.timeline.WINDOWS`, in their words): before
(baseline), during the faults, with faults on (Chaos Toolkit's steady state
after the method, before the undo), after the undo (the recovery checks: a
probe that held again there is not red for the checks before, which are its
time to recover); a window nothing was measured in has no column. A cell
shows the hypothesis' own figure (the value its tolerance judges), never an
output cut short.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.timeline import WINDOW_WORDS, WINDOWS, Measurement, role_of
from chaos_ext._products.report.model import Activity, RunView
from chaos_ext._products.report.series import as_number

__all__ = [
    "ActivityRow",
    "Cell",
    "LedgerRow",
    "ProbeRow",
    "ProbeTable",
    "activity_rows",
    "compact",
    "ledger_rows",
    "probe_table",
    "tolerance_text",
    "value_text",
]

_LIMIT = 160
_ROLE_WORDS = {"fault": "fault", "load": "load (not a fault)", "bookkeeping": "gameday's record"}


@dataclass(frozen=True)
class Cell:
    """A value and whether it was within tolerance (None: not evaluated)."""

    text: str
    ok: bool | None


@dataclass(frozen=True)
class ProbeRow:
    probe: str
    tolerance: str
    cells: tuple[Cell, ...]  # one per column of its table


@dataclass(frozen=True)
class ProbeTable:
    """The hypothesis table: the measured windows (its columns) and a row per probe."""

    windows: tuple[str, ...]
    rows: tuple[ProbeRow, ...]

    @property
    def headings(self) -> tuple[str, ...]:
        return tuple(WINDOW_WORDS[w] for w in self.windows)

    @property
    def red(self) -> bool:
        """Whether a cell is out of tolerance (drawn red; ✗ in Markdown)."""
        return any(cell.ok is False for row in self.rows for cell in row.cells)


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
    role: str  # fault | load (never fault time) | bookkeeping (gameday's own record)
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
    picked = (
        f"{tolerance['target']} "
        if isinstance(tolerance, Mapping) and tolerance.get("target")
        else ""
    )
    if isinstance(tolerance, Mapping) and tolerance.get("type") == "range":
        low, high = (tolerance.get("range") or [None, None])[:2]
        return f"{picked}in [{value_text(low)}, {value_text(high)}]"
    if isinstance(tolerance, Mapping) and tolerance.get("type") == "jsonpath":
        expect = tolerance.get("expect")
        shown = compact(expect, 40) if isinstance(expect, list | Mapping) else value_text(expect)
        condition = f" == {shown}" if "expect" in tolerance else " matches"
        return f"{picked}{tolerance.get('path')}{condition}"
    return compact(tolerance, 80)


def _cell(checks: list[Measurement], recovery: bool = False) -> Cell:
    """One window's checks of one probe. After the undo the hypothesis is polled until it
    holds: a last check that held is the recovery (misses before it are its time)."""
    if not checks:
        return Cell("—", None)
    if len(checks) == 1:
        check = checks[0]
        text = f"error: {check.error}" if check.error else (check.text or "not a number")
        return Cell(text, check.tolerance_met)
    breaches = sum(1 for c in checks if c.tolerance_met is False)
    numbers = [c.value for c in checks if c.value is not None]
    boolean = all(c.text.split()[-1:] in (["true"], ["false"]) for c in checks)
    spread = ""
    if numbers and not boolean:
        low, high = min(numbers), max(numbers)
        spread = f", {low:.4g}" if low == high else f", from {low:.4g} to {high:.4g}"
    if recovery and breaches and checks[-1].tolerance_met:
        return Cell(
            f"held again at check {len(checks)} ({breaches} out of tolerance before{spread})", True
        )
    return Cell(f"{len(checks)} checks, {breaches} out of tolerance{spread}", breaches == 0)


def probe_table(view: RunView) -> ProbeTable:
    """One row per hypothesis probe, one column per measured window (module docstring)."""
    checks = [m for m in view.timeline.measurements if m.hypothesis]
    names = list(view.hypothesis_probes)
    names += sorted({m.probe for m in checks} - set(names))
    windows = tuple(w for w in WINDOWS if any(m.window == w for m in checks))
    rows = tuple(
        ProbeRow(
            probe=view.shown(name),
            tolerance=view.shown(tolerance_text(view.tolerances.get(name))),
            cells=tuple(
                _cell([m for m in checks if m.probe == name and m.window == w], w == "after-undo")
                for w in windows
            ),
        )
        for name in names
    )
    return ProbeTable(windows, rows)


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
                role=_ROLE_WORDS[role_of(str(entry.get("kind", "")))],
                target=str(entry.get("target", "")),
                injected=_offset(as_number(entry.get("created_at")), view.start),
                undone=_offset(as_number(entry.get("closed_at")), view.start) or "not undone",
                state=str(entry.get("state", "")),
                note=note,
            )
        )
    return rows
