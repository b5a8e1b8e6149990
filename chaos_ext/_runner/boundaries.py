"""Where a stop may be raised, and what a stop did to the activity it cut short.

A stop (SIGTERM, SIGINT, a stop condition, chaoslib's graceful exit) is raised in
the main thread only where chaoslib turns the exception into "interrupted, then
the rollbacks": inside its run loop. :class:`StopBoundaries` arms the stop path
(:func:`chaos_ext._core.stop.arm`) when the main thread enters a part of that loop
(the steady state before, the continuous checks, the method, the steady state
after) and disarms it when it leaves (a gate that failed, the method's end before
the steady state after, the end of the steady state after, the rollbacks). A stop
that came while disarmed (set-up, between two phases) is raised at the next
boundary of the loop; when no boundary follows, the rollbacks come next anyway.
So a stop condition that fires while the steady state after is checked ends that
check, and the rollbacks start: the faults are still on there.

It also names what an activity cut short did: chaoslib leaves such a run without
a status ("did not run"); here it becomes ``interrupted`` with the seconds it ran
(``gameday_cut_short_after_s``), and an activity that escaped chaoslib with an
unexpected error (chaoslib then calls the run "aborted") becomes ``failed`` with
that error, so that neither is mistaken for a stop condition.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Mapping
from typing import Any

from chaoslib.run import RunEventHandler

from chaos_ext._core import stop as _stop
from chaos_ext._runner import signals

__all__ = ["StopBoundaries"]


class StopBoundaries(RunEventHandler):  # type: ignore[misc]
    """Arms and disarms the stop path at chaoslib's boundaries (register it first)."""

    def started(self, experiment: Any, journal: Any) -> None:
        signals.take_signals()  # after chaoslib installed its own handlers

    def _enter(self, phase: str) -> None:
        _stop.set_phase(phase)
        _stop.arm()
        signals.raise_if_stopping()

    def start_hypothesis_before(self, experiment: Any) -> None:
        self._enter("before")

    def hypothesis_before_completed(
        self, experiment: Any, state: Any = None, journal: Any = None
    ) -> None:
        # a gate that failed ends the loop without a method: nothing more to interrupt
        if not (isinstance(state, Mapping) and state.get("steady_state_met")):
            _stop.disarm()
            _stop.set_faults_closed()  # nothing was or will be injected

    def start_continuous_hypothesis(self, frequency: int) -> None:
        _stop.arm()
        signals.raise_if_stopping()

    def start_method(self, experiment: Any) -> None:
        self._enter("method")

    def start_activity(self, activity: Any) -> None:
        if not _stop.shielded():  # a rollback activity always runs
            signals.raise_if_stopping()

    def activity_completed(self, activity: Any, run: Any) -> None:
        if isinstance(run, dict) and "status" not in run:
            _name_the_ending(run)

    def method_completed(self, experiment: Any, state: Any = None) -> None:
        # chaoslib leaves its try between here and the steady state after when there is none
        _stop.disarm()
        _stop.set_phase("after")

    def start_hypothesis_after(self, experiment: Any) -> None:
        self._enter("after")

    def hypothesis_after_completed(
        self, experiment: Any, state: Any = None, journal: Any = None
    ) -> None:
        _stop.disarm()

    def start_rollbacks(self, experiment: Any) -> None:
        _stop.disarm()
        _stop.set_phase("rollbacks")
        signals.rollbacks_begin()

    def interrupted(self, experiment: Any, journal: Any) -> None:
        _stop.disarm()

    def signal_exit(self) -> None:
        _stop.disarm()

    def finish(self, journal: Any) -> None:
        _stop.disarm()


def _name_the_ending(run: dict[str, Any]) -> None:
    """An activity run chaoslib left without a status: a stop cut it short, or an
    unexpected error escaped it (we are in chaoslib's ``finally``: the exception is in
    flight)."""
    error = sys.exc_info()[1]
    if isinstance(error, KeyboardInterrupt | SystemExit) or (error is None and _stop.stopping()):
        run["status"] = "interrupted"
        run["gameday_cut_short_after_s"] = round(float(run.get("duration") or 0.0), 2)
        run["gameday_cut_short_by"] = _stop.cause() or type(error).__name__
    elif error is not None:
        run["status"] = "failed"
        run["exception"] = traceback.format_exception(type(error), error, None)
