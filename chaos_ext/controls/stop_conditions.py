"""Stop conditions, the one public entry: watch Prometheus and alerts, stop on a breach.

The abort plan (:mod:`._plan`), the alert watch built on the shared alert
machinery (:mod:`chaos_ext._core.prometheus_api.alertwatch`, ``alertstate``,
``replay``, ``alertsources``), the check for alerts that can never fire
(:mod:`._firable`) and the run-event handler live here; the CLI, the runner
and the ``chaos_ext.controls.abort`` control use this module only. No fault
domain imports it (import-linter).

:class:`AbortOnBreach` is a chaoslib ``RunEventHandler``: it starts a watch
thread (:mod:`._watch`) when the run starts (settling and the steady-state
hypothesis are watched too). Under gameday it watches for as long as any fault
of the run may be open, whatever chaoslib phase runs: the method and its
pauses, the steady state after (Chaos Toolkit's, run *before* the rollbacks:
the faults are still on), the rollbacks and the ledger sweep; the runner ends
it after the recovery check (:meth:`AbortOnBreach.close`). Every ``interval``
the thread evaluates the plan's conditions; on a breach (or Prometheus
unreachable ``unreachable_after`` times in a row, or a query Prometheus
rejects) it records the verdict in the journal under ``gameday.abort`` and the
stop under ``gameday.stops`` (with the time Prometheus evaluated the breach),
and stops the run through the one stop path
(:func:`chaos_ext._core.stop.request_stop`: a pending pause ends, the processes
an activity started are ended as a group), then pokes the main thread
(SIGUSR1): gameday's handler raises there only inside chaoslib's run loop, else
at its next boundary (:mod:`chaos_ext._runner.boundaries`); rollbacks run, then
gameday's ledger sweep, and the run is ``aborted``. Once every fault of the run
is undone (or a failed gate means none will be injected), a firing is recorded
(``gameday.abort.fired_after_undo``) and changes nothing; one that comes after
another stop (a SIGTERM first) is noted (``fired_while_stopping``): the first
stop decides.

Under plain ``chaos run`` (the ``chaos_ext.controls.abort`` control) the watch
follows chaoslib's events: from the run's start to the start of the rollbacks,
the steady state after included. Its interrupt (chaoslib's SIGUSR1, which
becomes ``SystemExit(20)``) is only delivered from the first event inside the
run loop; chaoslib emits ``running`` and logs its strategies *before* that
loop, and plays ``control.end`` after it: a ``SystemExit`` there escapes
``Runner.run`` and no journal is written at all. A watch that fires while the
run is still being set up records its verdict and ends pauses at once, and the
interrupt follows at the first event inside the loop (:meth:`AbortOnBreach._arm`).

``gameday run --abort-on plan.yaml`` registers it; under plain ``chaos run``
the ``chaos_ext.controls.abort`` control does. A watch that cannot start
protects nothing: before the steady-state hypothesis, :func:`prometheus_problem`
asks Prometheus for ``vector(1)``; if it does not answer, the run does not start
(:class:`~chaos_ext.errors.RunRefused` under gameday). This module is also the
public way to read plans (:func:`load_plan`, :func:`parse_plan`,
:func:`plan_path`, :func:`load_sources`) and alert selectors
(:func:`parse_selector`): the runner, the CLI and the controls import them
from here, never from the private modules behind them.
"""

from __future__ import annotations

import _thread
import logging
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

from chaoslib.run import RunEventHandler

from chaos_ext._core import stop as _stop
from chaos_ext._core.prometheus_api.alertsources import alertmanager_alerts
from chaos_ext._core.prometheus_api.client import client
from chaos_ext._core.prometheus_api.results import parse_instant
from chaos_ext._core.prometheus_api.rules import parse_selector
from chaos_ext.controls._firable import unfirable_in
from chaos_ext.controls._plan import (
    AbortPlan,
    load_plan,
    load_sources,
    parse_plan,
    plan_path,
)
from chaos_ext.controls._tracker import Verdict
from chaos_ext.controls._watch import START_TIMEOUT, AbortWatch, needs, prometheus_secrets
from chaos_ext.errors import ChaosExtError, InvalidArgument, RunRefused

__all__ = [
    "AbortOnBreach",
    "AbortPlan",
    "AbortWatch",
    "cannot_fire",
    "interrupt_main_thread",
    "load_plan",
    "load_sources",
    "parse_plan",
    "parse_selector",
    "plan_path",
    "prometheus_problem",
]

logger = logging.getLogger("chaostoolkit")

AFTER_UNDO = "recorded only: no fault of the run was open any more"
"""What a stop condition firing after the last undo does (docs/verdicts.md)."""


def interrupt_main_thread() -> None:
    """Make the main thread leave the experiment gracefully (rollbacks still run).

    chaoslib maps SIGUSR1 to ``SystemExit(20)``; sent to the main thread it
    also wakes a ``sleep`` or a ``wait`` there. Without chaoslib's handler
    (SIGUSR1 would kill the process) fall back to a KeyboardInterrupt.
    """
    handler = signal.getsignal(signal.SIGUSR1)
    if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
        _thread.interrupt_main()
        return
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)


def prometheus_problem(
    plan: AbortPlan, configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> str | None:
    """Why the watch could not start (Prometheus, or the Alertmanager it watches, does not
    answer), or None when it can."""
    timeout = max(plan.timeout, START_TIMEOUT)
    prometheus, alertmanager = needs(plan)
    try:
        if prometheus:
            prom = client(configuration, prometheus_secrets(secrets), timeout=timeout, retries=0)
            parse_instant(prom.instant("vector(1)"), "vector(1)")
    except ChaosExtError as exc:
        return f"abort watch {plan.source or 'plan'}: Prometheus does not answer: {exc}"
    try:
        if alertmanager:
            alertmanager_alerts(configuration, secrets, timeout)
    except ChaosExtError as exc:
        return f"abort watch {plan.source or 'plan'}: Alertmanager does not answer: {exc}"
    return None


def cannot_fire(
    plan: AbortPlan, configuration: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> list[str]:
    """One line per selected alerting rule that can never fire against this Prometheus
    (the recording rules or series it needs are not there); [] when it cannot tell."""
    if not plan.alerts.rules:
        return []
    try:
        prom = client(
            configuration,
            prometheus_secrets(secrets),
            timeout=max(plan.timeout, START_TIMEOUT),
            retries=0,
        )
        return unfirable_in(prom, plan.alerts.rules)
    except ChaosExtError as exc:
        logger.debug("could not check which alerts can fire: %s", exc)
        return []


class AbortOnBreach(RunEventHandler):  # type: ignore[misc]
    """Runs an :class:`AbortWatch` while any fault of the run may be open; records it."""

    def __init__(
        self,
        plan: AbortPlan,
        announce: Callable[[str], None] | None = None,
        *,
        check_on_start: bool = True,
        configuration: Mapping[str, Any] | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        """``configuration``: values given on the command line (``--var``), which chaoslib
        drops unless the experiment declares the key; they win over the run's."""
        if plan.empty:
            raise InvalidArgument("an abort plan needs at least one condition or alert")
        self.plan = plan
        self.check_on_start = check_on_start
        self._overrides = dict(configuration or {})
        self.announce = announce or logger.warning
        self.warn = warn or logger.warning
        self.cannot_fire: list[str] = []
        self.watch: AbortWatch | None = None
        self._journal: dict[str, Any] | None = None
        self._configuration: Mapping[str, Any] | None = None
        self._secrets: Mapping[str, Any] | None = None
        # the main thread is inside chaoslib's run loop (its SystemExit is handled there)
        self._armed = False
        self._deferred = False
        self._over = False  # stopped: never armed again (a late continuous-hypothesis event)
        self._arm_lock = threading.Lock()
        self.after_undo: Verdict | None = None  # fired once no fault was open: recorded only
        self.watch_verdict_noted = False  # fired after another stop: noted only

    def running(
        self,
        experiment: Any,
        journal: dict[str, Any],
        configuration: Mapping[str, Any] | None,
        secrets: Mapping[str, Any] | None,
        schedule: Any,
        settings: Any,
    ) -> None:
        configuration = {**(configuration or {}), **self._overrides}
        self._journal, self._configuration, self._secrets = journal, configuration, secrets
        problem = (
            prometheus_problem(self.plan, configuration, secrets) if self.check_on_start else None
        )
        if problem is not None:
            raise RunRefused(problem)  # before the hypothesis: nothing has run yet
        self.cannot_fire = cannot_fire(self.plan, configuration, secrets)
        for line in self.cannot_fire:
            self.warn(line)
        self._start()  # settling and the hypothesis are watched too, not just the method

    def start_hypothesis_before(self, experiment: Any) -> None:
        self._arm()

    def start_continuous_hypothesis(self, frequency: int) -> None:
        self._arm()

    def hypothesis_before_completed(
        self, experiment: Any, state: Any = None, journal: Any = None
    ) -> None:
        # a failed gate ends chaoslib's run loop without a method (and, with the default
        # rollback strategy, without rollbacks): an interrupt after it would lose the journal
        if not (isinstance(state, Mapping) and state.get("steady_state_met")) and (
            self._plain_run()
        ):
            self.stop()

    def start_method(self, experiment: Any) -> None:
        self._start()
        self._arm()

    def _arm(self) -> None:
        """The main thread is inside chaoslib's run loop: deliver a deferred interrupt."""
        with self._arm_lock:
            if self._over:
                return
            self._armed = True
            deferred, self._deferred = self._deferred, False
        if deferred:
            interrupt_main_thread()

    def _start(self) -> None:
        if self.watch is not None:
            return
        try:
            self.watch = AbortWatch(self.plan, self._configuration, self._secrets, self._fire)
        except ChaosExtError as exc:  # chaoslib would swallow it and run unwatched
            raise RunRefused(f"abort watch {self.plan.source or 'plan'}: {exc}") from exc
        self._write()
        self.watch.start()

    def _fire(self, verdict: Verdict) -> None:
        what = f"{verdict.condition} fired ({verdict.reason}): {verdict.detail}"
        if _stop.runner_owns_interrupts() and _stop.faults_closed():
            # after the last undo (or a gate that failed): written down, changes nothing
            self.after_undo = verdict
            _stop.note("stop-condition", AFTER_UNDO, fired_at=verdict.at, what=what)
            self._write()
            self.announce(f"abort condition {what}; {AFTER_UNDO}")
            return
        first = _stop.request_stop("stop-condition")  # pauses and running processes end now
        effect = "stopped the run" if first else "noted: the run was already stopping"
        _stop.note("stop-condition", effect, fired_at=verdict.at, what=what)
        if not first:
            self.watch_verdict_noted = True
            self._write()
            return
        self._write()
        self.announce(f"abort condition {what}; interrupting the run, rollbacks follow")
        if _stop.runner_owns_interrupts():  # gameday: its handler raises where that is safe
            interrupt_main_thread()
            return
        with self._arm_lock:
            if not self._armed:  # chaoslib is still setting up: interrupt at _arm
                self._deferred = not self._over
                return
        interrupt_main_thread()

    def _write(self) -> None:
        if self._journal is not None and self.watch is not None:
            record = {**self.watch.record(), "cannot_fire": self.cannot_fire}
            if self.after_undo is not None or self.watch_verdict_noted:
                # it fired, but it did not stop the run: not the run's "fired"
                late = record.pop("fired")
                key = "fired_after_undo" if self.after_undo is not None else "fired_while_stopping"
                record[key] = late
                record["fired"] = None
            self._journal.setdefault("gameday", {})["abort"] = record

    def stop(self) -> None:
        with self._arm_lock:  # chaoslib's run loop is over: no interrupt from here on
            self._over = True
            self._armed = self._deferred = False
        if self.watch is not None:
            self.watch.stop()
            self._write()

    def close(self) -> None:
        """gameday's runner: every fault of the run is undone and the recovery check is
        over; the watch ends here, not at chaoslib's last event."""
        self.stop()

    def _plain_run(self) -> bool:
        """Under plain ``chaos run`` (no gameday runner) the watch follows chaoslib's events;
        under gameday it watches every fault's whole life, until :meth:`close`."""
        return not _stop.runner_owns_interrupts()

    def method_completed(self, experiment: Any, state: Any = None) -> None:
        # between here and the steady state after, chaoslib may leave its loop
        with self._arm_lock:
            self._armed = False

    def start_hypothesis_after(self, experiment: Any) -> None:
        self._arm()  # the faults are still on: a breach here ends the check, rollbacks follow

    def hypothesis_after_completed(
        self, experiment: Any, state: Any = None, journal: Any = None
    ) -> None:
        with self._arm_lock:
            self._armed = False

    def signal_exit(self) -> None:
        if self._plain_run():
            self.stop()

    def interrupted(self, experiment: Any, journal: Any) -> None:
        if self._plain_run():
            self.stop()

    def start_rollbacks(self, experiment: Any) -> None:
        if self._plain_run():
            self.stop()

    def finish(self, journal: Any) -> None:
        if self._plain_run():
            self.stop()
