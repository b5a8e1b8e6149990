"""What ``gameday run`` and ``gate`` say about each run on the console: the outcome line,
what may still be injected, the notes, and every stop the run saw (from the journal)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from chaos_ext._products.report.model import retry_commands, unsteady_text, view_of
from chaos_ext._products.report.notes import recovery_line
from chaos_ext._runner.execute import RunResult

__all__ = ["say_verdict", "stop_lines"]


def say_verdict(result: RunResult, console: Console) -> None:
    """One line per experiment; loud lines for what may still be injected."""
    console.print(
        f"[bold]{escape(str(result.path))}[/]: {result.outcome} (exit {result.exit_code}), "
        f"journal {escape(str(result.journal_path))}",
        highlight=False,
    )
    view = view_of(result.journal, source=str(result.journal_path))
    if view.rollback_problems:
        console.print("[bold red]✗ a rollback did not complete: a fault may still be injected[/]")
        for problem in view.rollback_problems:
            console.print(f"[red]  - {escape(problem)}[/]", highlight=False)
        for command in retry_commands(view):
            console.print(f"[red]  retry: {escape(command)}[/]", highlight=False)
    elif view.hypothesis_outcome == "unsteady":
        console.print(
            f"[yellow]  unsteady: nothing was injected, rollbacks not needed "
            f"({escape(unsteady_text(view))})[/]",
            highlight=False,
        )
    checked = (view.recovery or {}).get("checked")
    live = recovery_line(view.recovery) if checked else None  # printed as it ended: once
    for line in view.notes:
        if line != live:
            console.print(f"[yellow]  {escape(line)}[/]", highlight=False)
    for line in stop_lines(result.journal):
        console.print(f"[yellow]  {escape(line)}[/]", highlight=False)


CAUSE_WORDS = {
    "stop-condition": "a stop condition",
    "graceful-exit": "chaoslib's graceful exit (SIGUSR1)",
}


def stop_lines(journal: dict[str, Any]) -> list[str]:
    """One line per stop the run saw: what, in which phase, and what it did."""
    start = journal.get("gameday", {}).get("stops") or []
    lines = []
    for stop in start:
        what = CAUSE_WORDS.get(str(stop.get("cause")), str(stop.get("cause")))
        detail = f" ({stop['what']})" if stop.get("what") else ""
        lines.append(f"stop: {what}{detail} during {stop.get('phase')}: {stop.get('effect')}")
    return lines
