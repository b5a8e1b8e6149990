"""Settling: wait for the steady state to hold before the first hypothesis check.

A fault injected into a system that is already out of tolerance proves
nothing. With ``gameday run --settle SECONDS`` (or the experiment extension
``{"name": "gameday", "settle_seconds": 60}``), the steady-state hypothesis is
polled with chaoslib's own evaluation, the experiment's configuration and
secrets, until it holds, for up to that many seconds. Only then does chaoslib's
before-method check (and the method) run. If time runs out the run stops there
with the outcome ``unsteady``: nothing is injected.

It hooks chaoslib's run events: ``running`` hands over the loaded configuration
and secrets, ``start_hypothesis_before`` settles. Running out of time raises
:class:`NotSettled`, a ``BaseException`` (chaoslib's event registry swallows
``Exception``), which leaves chaoslib's run before the method, through its
``finally`` (controls cleaned up, journal finished).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from chaoslib.hypothesis import run_steady_state_hypothesis
from chaoslib.run import EventHandlerRegistry, RunEventHandler
from rich.console import Console
from rich.markup import escape

__all__ = [
    "NotSettled",
    "SettleFirst",
]

_REPORT_EVERY = 10.0  # seconds between progress lines: never a silent terminal


class NotSettled(BaseException):
    """The steady state did not hold within the settle time; the method must not run."""


def _misses(state: Mapping[str, Any] | None) -> str:
    if not state:
        return "no hypothesis result"
    found = []
    for run in state.get("probes") or []:
        if run.get("tolerance_met") is not False:
            continue
        name = (run.get("activity") or {}).get("name", "?")
        if run.get("status") == "failed":
            found.append(f"{name} could not be measured")
        else:
            output = " ".join(str(run.get("output")).split())[:60]
            found.append(f"{name} = {output}")
    return "; ".join(found) or "not met"


class SettleFirst(RunEventHandler):  # type: ignore[misc]
    """Polls the hypothesis until it holds before chaoslib's own before-method check."""

    def __init__(
        self,
        seconds: float,
        console: Console,
        *,
        interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        redact: Callable[[str], str] = str,
    ) -> None:
        self.seconds = seconds
        self.redact = redact
        self.console = console
        self.interval = interval
        self.clock = clock
        self.sleep = sleep
        self._context: tuple[dict[str, Any], Any, Any] | None = None

    def running(
        self,
        experiment: dict[str, Any],
        journal: dict[str, Any],
        configuration: Any,
        secrets: Any,
        schedule: Any,
        settings: Any,
    ) -> None:
        self._context = (journal, configuration, secrets)

    def start_hypothesis_before(self, experiment: dict[str, Any]) -> None:
        if self.seconds <= 0 or self._context is None:
            return
        journal, configuration, secrets = self._context
        record = self._settle(experiment, configuration, secrets)
        journal.setdefault("gameday", {})["settle"] = {
            k: v for k, v in record.items() if k != "state"
        }
        if not record["settled"]:
            journal["steady_states"]["before"] = record["state"]
            raise NotSettled(f"did not settle within {self.seconds:g} s: {record['last']}")

    def _settle(
        self, experiment: dict[str, Any], configuration: Any, secrets: Any
    ) -> dict[str, Any]:
        started = self.clock()
        deadline = started + self.seconds
        self.console.print(
            f"[bold cyan]▶ settling[/]: waiting up to {self.seconds:g} s for the steady state"
        )
        attempts, last_report = 0, started
        while True:
            state = run_steady_state_hypothesis(
                experiment, configuration, secrets, experiment.get("dry"), EventHandlerRegistry()
            )
            attempts += 1
            now = self.clock()
            waited = now - started
            met = state is None or bool(state.get("steady_state_met"))
            last = "met" if met else self.redact(_misses(state))
            if met or now >= deadline:
                self._final(met, waited, attempts, last)
                return {
                    "seconds": self.seconds,
                    "settled": met,
                    "waited_s": round(waited, 2),
                    "attempts": attempts,
                    "last": last,
                    "state": state,
                }
            if now - last_report >= _REPORT_EVERY or attempts == 1:
                self.console.print(
                    f"  settling: {waited:.0f}/{self.seconds:g} s, attempt {attempts}: "
                    f"{escape(last)}",
                    highlight=False,
                )
                last_report = now
            self.sleep(max(0.0, min(self.interval, deadline - now)))

    def _final(self, met: bool, waited: float, attempts: int, last: str) -> None:
        if met:
            self.console.print(
                f"  [green]settled[/] after {waited:.1f} s ({attempts} check(s))", highlight=False
            )
        else:
            self.console.print(
                f"  [bold red]not settled[/] after {waited:.1f} s ({attempts} checks): "
                f"{escape(last)}; nothing will be injected",
                highlight=False,
            )
