"""Live progress of a run on the terminal (rich), fed by chaoslib's run events."""

from __future__ import annotations

import json
import threading
from typing import Any

from chaoslib.run import RunEventHandler
from rich.console import Console
from rich.markup import escape
from rich.status import Status

from chaos_ext._runner.redact import Redactor
from chaos_ext._runner.verdict import failing_result

__all__ = ["ProgressPrinter", "short_value"]

_MAX_VALUE = 90


def short_value(value: Any, redactor: Redactor | None = None) -> str:
    """A one-line rendering of an activity output."""
    if redactor is not None:
        value = redactor.value(value)
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, dict | list):
        text = json.dumps(value, default=str, separators=(",", ":"))
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 3] + "..."


class ProgressPrinter(RunEventHandler):  # type: ignore[misc]
    """Prints each phase and activity as it happens, with a spinner meanwhile."""

    def __init__(self, console: Console, redactor: Redactor) -> None:
        self.console = console
        self.redactor = redactor
        self._lock = threading.Lock()
        self._running: dict[int, str] = {}
        self._status: Status | None = None

    def _phase(self, text: str) -> None:
        self.console.print(f"[bold cyan]▶ {text}[/]")

    def _spin(self) -> None:
        label = ", ".join(self._running.values())
        if label and self._status is None:
            self._status = self.console.status(f"running {label}")
            self._status.start()
        elif label and self._status is not None:
            self._status.update(f"running {label}")
        elif not label and self._status is not None:
            self._status.stop()
            self._status = None

    def started(self, experiment: dict[str, Any], journal: dict[str, Any]) -> None:
        self.console.print(f"[bold]Experiment:[/] {escape(str(experiment.get('title', '?')))}")

    def start_hypothesis_before(self, experiment: dict[str, Any]) -> None:
        self._phase("steady state before the method")

    def start_method(self, experiment: dict[str, Any]) -> None:
        self._phase("method")

    def start_hypothesis_after(self, experiment: dict[str, Any]) -> None:
        self._phase("steady state after the method")

    def start_rollbacks(self, experiment: dict[str, Any]) -> None:
        self._phase("rollbacks")

    def signal_exit(self) -> None:
        self.console.print("[bold yellow]⚠ interrupted: rolling back[/]")

    def interrupted(self, experiment: dict[str, Any], journal: dict[str, Any]) -> None:
        self.signal_exit()

    def start_activity(self, activity: dict[str, Any]) -> None:
        with self._lock:
            self._running[id(activity)] = str(activity.get("name", "?"))
            self._spin()

    def activity_completed(self, activity: dict[str, Any], run: dict[str, Any]) -> None:
        with self._lock:
            self._running.pop(id(activity), None)
            self._spin()
        ok = run.get("status") == "succeeded"
        # a hypothesis probe is judged by its tolerance; anything else must succeed
        why = None if "tolerance" in activity else failing_result({**run, "activity": activity})
        mark = "[green]✓[/]" if ok and why is None else "[red]✗[/]"
        kind = activity.get("type", "activity")
        detail = short_value(run.get("output"), self.redactor) if ok else _last_line(run)
        if ok and why is not None:
            detail = f"{why} {detail}"
        detail = escape(self.redactor.text(detail))
        self.console.print(
            f"  {mark} {kind} [bold]{escape(str(activity.get('name', '?')))}[/] "
            f"({run.get('duration', 0):.2f} s) {detail}",
            markup=True,
            highlight=False,
        )

    def _verdict(self, state: dict[str, Any] | None, when: str) -> None:
        if state is None:
            return
        if state.get("steady_state_met"):
            self.console.print(f"  [green]steady state met ({when})[/]")
            return
        for probe in state.get("probes", []):
            if not probe.get("tolerance_met", True):
                name = probe.get("activity", {}).get("name", "?")
                value = short_value(probe.get("output"), self.redactor)
                self.console.print(
                    f"  [red]steady state NOT met ({when}): {escape(name)} = {escape(value)}[/]"
                )

    def hypothesis_before_completed(
        self, experiment: dict[str, Any], state: dict[str, Any], journal: dict[str, Any]
    ) -> None:
        self._verdict(state, "before")

    def hypothesis_after_completed(
        self, experiment: dict[str, Any], state: dict[str, Any], journal: dict[str, Any]
    ) -> None:
        self._verdict(state, "after")

    def finish(self, journal: dict[str, Any]) -> None:
        with self._lock:
            self._running.clear()
            self._spin()


def _last_line(run: dict[str, Any]) -> str:
    lines = "".join(run.get("exception") or []).strip().splitlines()
    return lines[-1] if lines else str(run.get("status"))
