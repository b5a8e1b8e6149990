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


def rows(journal: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(probe, phase value(s), verdict) for each hypothesis probe of one journal."""
    found: list[tuple[str, str, str]] = []
    states = journal.get("steady_states") or {}
    for phase in ("before", "after"):
        state = states.get(phase) or {}
        for probe in state.get("probes") or []:
            name = probe.get("activity", {}).get("name", "?")
            ok = probe.get("tolerance_met")
            # failing before the method: nothing was injected, the system was not steady
            missed = "NOT STEADY" if phase == "before" else "DEVIATED"
            tolerance = probe.get("activity", {}).get("tolerance")
            target = tolerance.get("target", "") if isinstance(tolerance, dict) else ""
            found.append(
                (
                    f"{name} ({phase})",
                    _figure(probe.get("output"), target),
                    "held" if ok else missed,
                )
            )
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
                f"fault {entry.get('kind')} on {entry.get('target')}",
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
