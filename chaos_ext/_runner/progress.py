"""Live progress of a run on the terminal (rich), fed by chaoslib's run events.

The steady-state checks are named by the window of the run's timeline they
fall in (:data:`chaos_ext._core.timeline.WINDOW_WORDS`): chaoslib's check
after the method runs before the rollbacks, so it is "with faults on" when the
method injected something (a fault in the ledger, or an action that recorded
none), else "after the method (nothing was injected)".
"""

from __future__ import annotations

import json
import threading
from typing import Any

from chaoslib.run import RunEventHandler
from rich.console import Console
from rich.markup import escape
from rich.status import Status

from chaos_ext._core.ledger import current_run_id, recorded_here
from chaos_ext._core.timeline import WINDOW_PHRASES, WINDOW_WORDS, figure_text, role_of
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
        self._in_method = False
        self._unrecorded_action = False  # a method action that recorded no ledger entry

    def _after_window(self) -> str:
        """``faults-on`` when the method injected something (module docstring)."""
        faults = any(role_of(e.kind) == "fault" for e in recorded_here(current_run_id()))
        return "faults-on" if faults or self._unrecorded_action else "no-faults"

    def _phase(self, text: str) -> None:
        self.console.print(f"[bold cyan]▶ {escape(text)}[/]")

    def _spin(self) -> None:
        label = ", ".join(self._running.values())
        if label and self._status is None:
            self._status = self.console.status(f"running {escape(label)}")
            self._status.start()
        elif label and self._status is not None:
            self._status.update(f"running {escape(label)}")
        elif not label and self._status is not None:
            self._status.stop()
            self._status = None

    def started(self, experiment: dict[str, Any], journal: dict[str, Any]) -> None:
        self.console.print(f"[bold]Experiment:[/] {escape(str(experiment.get('title', '?')))}")

    def start_hypothesis_before(self, experiment: dict[str, Any]) -> None:
        self._phase(_heading("before"))

    def start_method(self, experiment: dict[str, Any]) -> None:
        self._in_method = True
        self._phase("method")

    def method_completed(self, experiment: dict[str, Any], state: Any = None) -> None:
        self._in_method = False

    def start_hypothesis_after(self, experiment: dict[str, Any]) -> None:
        self._in_method = False
        self._phase(_heading(self._after_window()))

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
        output = run.get("output")
        if self._in_method and activity.get("type") == "action":
            recorded = isinstance(output, dict) and output.get("ledger_id")
            self._unrecorded_action = self._unrecorded_action or not recorded
        ok = run.get("status") == "succeeded"
        # a hypothesis probe is judged by its tolerance; anything else must succeed
        why = None if "tolerance" in activity else failing_result({**run, "activity": activity})
        mark = "[green]✓[/]" if ok and why is None else "[red]✗[/]"
        kind = activity.get("type", "activity")
        detail = self._figure(activity, output) if ok else _last_line(run)
        if ok and why is not None:
            detail = f"{why} {detail}"
        detail = escape(self.redactor.text(detail))
        self.console.print(
            f"  {mark} {kind} [bold]{escape(str(activity.get('name', '?')))}[/] "
            f"({run.get('duration', 0):.2f} s) {detail}",
            markup=True,
            highlight=False,
        )

    def _figure(self, activity: dict[str, Any], output: Any) -> str:
        """A hypothesis probe's own figure (what its tolerance judges), else the output."""
        if "tolerance" in activity:
            shown = figure_text(self.redactor.value(output), activity["tolerance"])
            if shown:
                return shown
        return short_value(output, self.redactor)

    def _verdict(self, state: dict[str, Any] | None, when: str) -> None:
        if state is None:
            return
        if state.get("steady_state_met"):
            self.console.print(f"  [green]steady state met ({when})[/]")
            return
        for probe in state.get("probes", []):
            if not probe.get("tolerance_met", True):
                name = probe.get("activity", {}).get("name", "?")
                value = self._figure(probe.get("activity") or {}, probe.get("output"))
                self.console.print(
                    f"  [red]steady state NOT met ({when}): {escape(name)} = {escape(value)}[/]"
                )

    def hypothesis_before_completed(
        self, experiment: dict[str, Any], state: dict[str, Any], journal: dict[str, Any]
    ) -> None:
        self._verdict(state, WINDOW_PHRASES["before"])

    def hypothesis_after_completed(
        self, experiment: dict[str, Any], state: dict[str, Any], journal: dict[str, Any]
    ) -> None:
        self._verdict(state, WINDOW_PHRASES[self._after_window()])

    def finish(self, journal: dict[str, Any]) -> None:
        with self._lock:
            self._running.clear()
            self._spin()


def _heading(window: str) -> str:
    """``steady state before (baseline)``, ``with faults on (steady state after ...)``."""
    words = WINDOW_WORDS[window]
    return words if "steady state" in words else f"steady state {words}"


def _last_line(run: dict[str, Any]) -> str:
    lines = "".join(run.get("exception") or []).strip().splitlines()
    return lines[-1] if lines else str(run.get("status"))
