"""Did the system come back, and how fast? The hypothesis polled after the undo.

After the rollbacks and the ledger sweep of a run whose method started, the
steady-state hypothesis is polled until it holds, for up to ``recover_seconds``
(``--recover SECONDS``, or the experiment extension
``{"name": "gameday", "recover_seconds": 120}``; default
:data:`chaos_ext._runner.run_times.DEFAULT_RECOVER_S`; 0 turns it off). The journal records, under
``gameday.recovery``::

    {"seconds": 60, "recovered": true, "time_to_recover_s": 10.8,
     "undone_at": 1795940462.3, "attempts": 7, "last": "met",
     "checks": [{"probe": "error-ratio", "at": 1795940463.4, "value": 0.2,
                 "text": "0.2", "tolerance_met": false, "error": ""}, ...]}

``checks`` keeps each probe's figure at each attempt (the value its tolerance
judges, :func:`chaos_ext._core.timeline.figure_of`): the run's timeline shows
them in the window *after the undo*.

``time_to_recover_s`` runs from the moment the last fault was undone (the
latest ``closed_at`` of the run's fault entries in the ledger, loads and
gameday's own records aside, else the end of its last rollback) to the first
check that held, at the poll's resolution (:data:`POLL_S`, or the probes' own
time when they are slower). A hypothesis
that never holds again makes the run ``not-recovered``
(:mod:`chaos_ext._runner.verdict`): "the fault was removed, but the system did
not return to its steady state within N s".

Not checked (and recorded why): a run whose method never started (nothing was
injected), one stopped by a signal or a stop condition (it must exit at once),
an experiment without a hypothesis, or a method with no action (a pure check).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import FrameType
from typing import Any

from chaoslib.hypothesis import run_steady_state_hypothesis
from chaoslib.run import EventHandlerRegistry
from rich.console import Console
from rich.markup import escape

from chaos_ext._core import stop as _stop
from chaos_ext._core.timeline import epoch, error_line, figure_of, figure_text, role_of
from chaos_ext._runner.signals import handled

__all__ = ["POLL_S", "check_recovery", "undone_at"]

POLL_S = 1.0
"""Seconds between two checks of the hypothesis while waiting for recovery."""


def _epoch(text: Any) -> float | None:
    """A journal time (chaoslib writes ISO 8601 with an offset) as seconds since the epoch."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def undone_at(journal: Mapping[str, Any], ledger: Sequence[Mapping[str, Any]]) -> float | None:
    """When the last fault of the run was undone: its ledger, else its last rollback
    (a load or a record of gameday's own is no fault: chaos_ext._core.timeline.role_of)."""
    closed = [
        float(e["closed_at"])
        for e in ledger
        if isinstance(e.get("closed_at"), int | float) and role_of(str(e.get("kind"))) == "fault"
    ]
    if closed:
        return max(closed)
    ends = [_epoch(r.get("end")) for r in journal.get("rollbacks") or []]
    found = [e for e in ends if e is not None]
    return max(found) if found else None


def _why_not(journal: Mapping[str, Any], method_started: bool, stopped: bool) -> str | None:
    experiment = journal.get("experiment") or {}
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    if not method_started:
        return "nothing was injected"
    if stopped:
        return "the run was stopped: it exits at once"
    if not hypothesis.get("probes"):
        return "no steady-state hypothesis"
    if not any(a.get("type") == "action" for a in experiment.get("method") or []):
        return "nothing to recover from: the method has no action"
    return None


def _misses(state: Mapping[str, Any] | None) -> str:
    names = [
        str((run.get("activity") or {}).get("name", "?"))
        for run in (state or {}).get("probes") or []
        if run.get("tolerance_met") is False
    ]
    return "out of tolerance: " + ", ".join(names) if names else "not met"


class _Wait:
    """The recovery wait: ended by a signal; a probe in progress is interrupted."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.ended = threading.Event()
        self.in_probe = False

    def note(self, signum: int, frame: FrameType | None) -> None:
        self.ended.set()
        cause = signal.Signals(signum).name
        first = _stop.request_stop(cause, end_processes=False)
        _stop.note(cause, "ended the recovery check" if first else "noted: already stopping")
        self.console.print(
            f"[yellow]{signal.Signals(signum).name} received: the recovery check stops[/]"
        )
        if self.in_probe:  # the faults are undone: cutting a probe short is safe
            self.in_probe = False
            raise KeyboardInterrupt

    def probe(self, run: Callable[[], Any]) -> Any:
        """``run()``, or None when a signal cut it short."""
        self.in_probe = True
        try:
            return run()
        except KeyboardInterrupt:
            return None
        finally:
            self.in_probe = False


@contextmanager
def _signals_end_the_wait(console: Console) -> Iterator[_Wait]:
    """SIGINT/SIGTERM end the wait at once (the faults are already undone); they raise
    only inside a probe, which :meth:`_Wait.probe` catches: nothing else is cut short."""
    wait = _Wait(console)
    with handled(wait.note):
        yield wait


def check_recovery(
    journal: dict[str, Any],
    context: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
    ledger: Sequence[Mapping[str, Any]],
    seconds: float,
    console: Console,
    *,
    method_started: bool,
    stopped: bool,
) -> dict[str, Any]:
    """Poll the hypothesis until it holds (at most ``seconds``); record it in the journal.

    A signal during the wait ends it: the run is then ``interrupted``."""
    why = "off (--recover 0)" if seconds <= 0 else _why_not(journal, method_started, stopped)
    if why is not None:
        record: dict[str, Any] = {"seconds": seconds, "checked": False, "why": why}
        journal.setdefault("gameday", {})["recovery"] = record
        return record
    console.print(f"[bold cyan]▶ recovery[/]: waiting up to {seconds:g} s for the steady state")
    since = undone_at(journal, ledger) or time.time()
    with _signals_end_the_wait(console) as wait:
        record = _poll(context, since, seconds, wait)
    if wait.ended.is_set() or _stop.stopping():
        journal["status"] = "aborted" if _stop.cause() == "stop-condition" else "interrupted"
        record.update(checked=False, why=f"{_stop.cause() or 'a signal'} ended the recovery check")
    journal.setdefault("gameday", {})["recovery"] = record
    if record.get("recovered"):
        console.print(
            f"  [green]recovered[/] {record['time_to_recover_s']:.1f} s after the "
            f"undo ({record['attempts']} check(s))",
            highlight=False,
        )
    elif record["checked"]:
        console.print(
            f"  [bold red]not recovered[/] within {seconds:g} s of the undo: "
            f"{escape(record['last'])}",
            highlight=False,
        )
    return record


def _poll(
    context: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
    since: float,
    seconds: float,
    wait: _Wait,
) -> dict[str, Any]:
    experiment, configuration, secrets = context
    deadline = time.time() + seconds
    attempts, met, last = 0, False, "not checked"
    checks: list[dict[str, Any]] = []
    ended = wait.ended
    while not ended.is_set() and not _stop.stopping():
        state = wait.probe(
            lambda: run_steady_state_hypothesis(
                experiment, configuration, secrets, experiment.get("dry"), EventHandlerRegistry()
            )
        )
        if ended.is_set() or _stop.stopping():
            break
        attempts += 1
        checks += _checks_of(state, configuration)
        met = state is None or bool(state.get("steady_state_met"))
        last = "met" if met else _misses(state)
        if met or time.time() >= deadline:
            break
        ended.wait(max(0.0, min(POLL_S, deadline - time.time())))
    return {
        "seconds": seconds,
        "checked": True,
        "recovered": met,
        "undone_at": since,
        "time_to_recover_s": round(max(0.0, time.time() - since), 2) if met else None,
        "attempts": attempts,
        "last": last,
        "checks": checks,
    }


def _checks_of(state: Mapping[str, Any] | None, configuration: Mapping[str, Any]) -> list[Any]:
    """Each probe's figure in one attempt, for the run's timeline (module docstring)."""
    found = []
    for run in (state or {}).get("probes") or []:
        activity = run.get("activity") or {}
        failed = run.get("status") == "failed"
        output = None if failed else run.get("output")
        tolerance = activity.get("tolerance")
        found.append(
            {
                "probe": str(activity.get("name", "?")),
                "at": epoch(run.get("end")) or time.time(),
                "value": figure_of(output, tolerance, configuration),
                "text": "" if failed else figure_text(output, tolerance, configuration),
                "tolerance_met": run.get("tolerance_met"),
                "error": error_line(run) if failed else "",
            }
        )
    return found
