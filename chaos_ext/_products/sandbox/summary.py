"""Print the one-screen summary at the end of `make demo`: each hypothesis, its verdict,
the key figures, and why.

``python -m chaos_ext._products.sandbox.summary JOURNAL_DIR``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from chaos_ext._core.console import make_console
from chaos_ext._core.timeline import WINDOW_PHRASES, Measurement, role_of, timeline_of

__all__ = ["main", "rows"]


def _figure(value: Any, target: str = "") -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, dict) and target in value:  # what the tolerance judged
        return f"{target}={_figure(value[target])}"
    if isinstance(value, dict):
        keys = ("held", "opened", "refused_at", "delay_seconds", "pps", "median_ms", "p95_ms")
        picked = {k: value[k] for k in keys if k in value}
        return ", ".join(f"{k}={v}" for k, v in picked.items()) or "…"
    return str(value)


def _checks(journal: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each hypothesis probe's check in each window of the run's timeline: Chaos Toolkit's
    before (before the faults) and after (with the faults on), the last recovery check
    (after the undo), each with the figure its tolerance judged."""
    picked: dict[tuple[str, str], Measurement] = {}
    for m in timeline_of(journal).measurements:
        if m.phase in ("before", "after", "recovery"):
            picked[(m.probe, m.window)] = m  # the recovery's last check wins
    found = []
    for (probe, window), m in picked.items():
        value = m.text or (f"error: {m.error}" if m.error else "?")
        found.append((f"{probe} ({WINDOW_PHRASES[window]})", value, _verdict(m)))
    return found


def _verdict(m: Measurement) -> str:
    if m.tolerance_met:
        return "held"
    # failing before the method: nothing was injected, the system was not steady
    return {"before": "NOT STEADY", "after-undo": "NOT RECOVERED"}.get(m.window, "DEVIATED")


def rows(journal: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(check, value(s), verdict) for each hypothesis probe, action and fault of a journal."""
    found = _checks(journal)
    for run in journal.get("run") or []:
        activity = run.get("activity", {})
        if activity.get("type") == "action":
            found.append(
                (
                    f"action {activity.get('name')}",
                    _figure(run.get("output")),
                    str(run.get("status")),
                )
            )
    for entry in (journal.get("gameday") or {}).get("ledger") or []:
        held = (
            entry.get("closed_at", 0) - entry.get("created_at", 0) if entry.get("closed_at") else 0
        )
        found.append(
            (
                f"{role_of(str(entry.get('kind')))} {entry.get('kind')} on {entry.get('target')}",
                f"ledger {entry.get('id')}, on for {held:.0f} s"
                if held
                else f"ledger {entry.get('id')}",
                str(entry.get("state")),
            )
        )
    return found


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    console = make_console()
    for path in sorted(Path(args[0]).glob("*.json")):
        journal = json.loads(path.read_text())
        outcome = journal.get("gameday", {}).get("outcome", journal.get("status"))
        table = Table(title=f"{journal['experiment']['title']} → {outcome}", title_justify="left")
        for column in ("check", "measured", "verdict"):
            table.add_column(column)
        for check, value, verdict in rows(journal):
            table.add_row(check, value, verdict)
        console.print(table)


if __name__ == "__main__":
    main()
