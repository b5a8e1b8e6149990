"""What a report says about a run's outcome, from its timeline (pure).

"held before, during and after the faults" is said only of the windows that
were measured (:data:`chaos_ext._core.timeline.WINDOWS`); a run that injected
nothing says so; "see the red cells" only when a cell is out of tolerance.
"""

from __future__ import annotations

from chaos_ext._core.timeline import WINDOW_PHRASES
from chaos_ext._products.report.model import RunView
from chaos_ext._products.report.tables import ProbeTable
from chaos_ext._runner.verdict import OUTCOME_TEXT

__all__ = ["verdict_text", "windows_phrase"]


def windows_phrase(windows: tuple[str, ...]) -> str:
    """``before the faults, with the faults on and after the undo``."""
    phrases = [WINDOW_PHRASES[w] for w in windows if w in WINDOW_PHRASES]
    if len(phrases) < 2:
        return "".join(phrases)
    return ", ".join(phrases[:-1]) + " and " + phrases[-1]


def _injected_nothing(view: RunView) -> bool:
    return not view.timeline.faults()


def _held(view: RunView, table: ProbeTable) -> str:
    if not table.windows:
        return "the run completed; no steady-state hypothesis was checked"
    if _injected_nothing(view):
        return "the steady state held; the experiment injected nothing, so no fault was tested"
    return f"the steady state held {windows_phrase(table.windows)}"


def _deviated(table: ProbeTable, markdown: bool) -> str:
    missed = tuple(
        w
        for i, w in enumerate(table.windows)
        if any(row.cells[i].ok is False for row in table.rows)
    )
    text = OUTCOME_TEXT["deviated"]
    if missed:
        text += f": out of tolerance {windows_phrase(missed)}"
    if table.red:
        text += " (see the cells marked ✗)" if markdown else " (see the red cells)"
    return text


def verdict_text(view: RunView, table: ProbeTable, *, markdown: bool = False) -> str:
    """The sentence after "Verdict:" for ``view``'s outcome (module docstring)."""
    if view.outcome == "held":
        return _held(view, table)
    if view.outcome == "deviated":
        return _deviated(table, markdown)
    return OUTCOME_TEXT.get(view.outcome, view.outcome)
