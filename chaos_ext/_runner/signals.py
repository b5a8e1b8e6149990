"""SIGTERM, SIGINT and a stop condition end a run promptly, whatever it is doing.

chaoslib sleeps an activity's ``pauses.after`` inside a ``finally`` (its flag
meant to skip the pause when interrupted is never set), so a signal that
lands in an action still waits out the whole pause before the rollbacks:
32-35 s after a SIGTERM with a 30 s pause, past Kubernetes' default 30 s
grace period. While a run is under :func:`install` (:func:`prompt_signals`),
every stop goes through :func:`chaos_ext._core.stop.request_stop`:

* SIGTERM, SIGINT and SIGUSR1 (the stop-condition watch's way to reach the
  main thread) raise KeyboardInterrupt where they land, once per run
  (chaoslib wraps any Exception raised in a Python activity into a failed
  activity, so nothing else would stop the method);
* chaoslib's pauses are slept on the stop event, so a pause pending or in
  progress ends at once; rollback pauses are skipped too;
* chaoslib's process provider starts each process in its own session
  (:func:`chaos_ext._core.stop.run_process`), and a stop ends the whole group:
  ``sh -c 'sleep 77'`` leaves no ``sleep`` behind;
* once the rollbacks have begun (:func:`rollbacks_begin`), or after a first
  signal, further signals are noted and never raise: they cannot cut a
  rollback short, and after the run they cannot kill the process (exit 2,
  not 143 or 130).

The rollback itself then runs shielded (:func:`chaos_ext._runner.sweep.shielded`),
and the recovery wait ends at a signal (:mod:`chaos_ext._runner.recovery`); both
install their handlers through :func:`handled`, the one place, besides
:func:`install`, where the runner sets a signal handler.
The budget from the signal to the journal on disk is :data:`SIGNAL_EXIT_BUDGET_S`;
:data:`TERMINATION_GRACE_S` is what a pod running gameday needs
(``terminationGracePeriodSeconds`` of ``gameday schedule``'s CronJob).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from chaoslib import activity as chaoslib_activity
from chaoslib.provider import process as chaoslib_process

from chaos_ext._core import stop as _stop

__all__ = [
    "SIGNAL_EXIT_BUDGET_S",
    "STOP_BY_PEOPLE",
    "TERMINATION_GRACE_S",
    "handled",
    "install",
    "interrupt",
    "interrupted",
    "on_ungraceful",
    "prompt_signals",
    "raise_if_stopping",
    "rollbacks_begin",
    "stop_cause",
    "take_signals",
]

SIGNAL_EXIT_BUDGET_S = 10
"""Seconds from SIGTERM/SIGINT to the run's exit with its journal written (tested)."""

TERMINATION_GRACE_S = 120
"""A pod's grace period: the exit budget, plus the rollback of every fault kind at its
slowest (each Kubernetes call may take its 5 s connect + 30 s read timeout), plus the
report; Kubernetes' default of 30 s is too short once an API server is slow."""

STOP_BY_PEOPLE = (signal.SIGINT, signal.SIGTERM)
"""The signals people and Kubernetes send to stop a run."""
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
_raised: list[bool] = [False]  # the run was interrupted once already
logger = logging.getLogger("chaostoolkit")


class _PauseClock:
    """``time`` as chaoslib.activity sees it: the same, except that sleep ends at a stop."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        _stop.pause(seconds)


class _GroupedProcesses:
    """``subprocess`` as chaoslib's process provider sees it: ``run`` ends whole groups."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def run(args: Any, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return _stop.run_process(args, **kwargs)


Handler = Callable[[int, FrameType | None], Any]


@contextmanager
def handled(
    handler: Handler, signals: tuple[signal.Signals, ...] = STOP_BY_PEOPLE
) -> Iterator[None]:
    """The body runs with ``handler`` on ``signals`` (SIGINT, SIGTERM); the old ones come back."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def on_ungraceful(handler: Handler) -> None:
    """Replace chaoslib's SIGUSR2 handler (its "stop now, skip the rollbacks") for the run."""
    signal.signal(signal.SIGUSR2, handler)


def interrupted() -> bool:
    """Whether the run has been told to stop (a signal or a stop condition)."""
    return _stop.stopping()


def stop_cause() -> str | None:
    """What stopped the run first: ``"stop-condition"``, ``"SIGTERM"``, ``"SIGINT"``,
    ``"graceful-exit"`` (chaoslib's ``exit_gracefully``)."""
    return _stop.cause()


def _cause_of(signum: int) -> str:
    """SIGUSR1 is the abort watch's poke when it asked for the stop, else chaoslib's
    ``exit_gracefully`` (or anyone's SIGUSR1): a graceful exit, not a stop condition."""
    if signum == signal.SIGUSR1:
        return "stop-condition" if _stop.cause() == "stop-condition" else "graceful-exit"
    return signal.Signals(signum).name


def _raise(cause: str) -> None:
    _raised[0] = True
    if cause in ("stop-condition", "graceful-exit"):  # chaoslib's "stop, with the rollbacks"
        raise SystemExit(20)
    # KeyboardInterrupt, not chaoslib's InterruptExecution: chaoslib wraps every
    # Exception raised inside a Python activity into a failed activity and goes
    # on with the method, so a SIGTERM landing in an activity would be lost.
    raise KeyboardInterrupt(f"{cause} received")


def interrupt(signum: int, frame: FrameType | None) -> None:
    """The run's stop handler: the first stop decides; it ends pauses and processes now
    and raises where that is safe (:func:`chaos_ext._core.stop.armed`), else at the next
    boundary (:func:`raise_if_stopping`). Later stops are noted and never raise."""
    cause = _cause_of(signum)
    first = _stop.request_stop(cause)
    if cause != "stop-condition":  # the watch wrote its own stop down
        _stop.note(cause, "stopped the run" if first else "noted: the run was already stopping")
    if not first and cause != "stop-condition":
        logger.warning(
            "%s received: the run is already stopping; the rollbacks finish first", cause
        )
    if _raised[0] or _stop.shielded() or not _stop.armed():
        return
    _raise(_stop.cause() or cause)


def raise_if_stopping() -> None:
    """At a boundary inside chaoslib's run loop: raise the stop that came where raising was
    not safe (set-up, between two phases), once."""
    cause = _stop.cause()
    if cause is not None and not _raised[0] and not _stop.shielded():
        _raise(cause)


def take_signals() -> None:
    """(Re)install :func:`interrupt` (after chaoslib installed its own handlers)."""
    for sig in _STOP_SIGNALS:
        signal.signal(sig, interrupt)


def rollbacks_begin() -> None:
    """From here on a stop never raises, nor ends a process: the rollbacks must complete."""
    _stop.shield()


def install() -> Callable[[], None]:
    """Install :func:`interrupt`, interruptible pauses and grouped processes; returns what
    undoes it. After a stopped run, the handler that only notes stays installed (the
    process is on its way out: a late signal must not change its exit code)."""
    _stop.reset()
    _stop.take_interrupts(True)
    _raised[0] = False
    previous = {sig: signal.signal(sig, interrupt) for sig in _STOP_SIGNALS}
    clock, processes = chaoslib_activity.time, chaoslib_process.subprocess
    chaoslib_activity.time = _PauseClock()
    chaoslib_process.subprocess = _GroupedProcesses()

    def restore() -> None:
        _stop.take_interrupts(False)
        chaoslib_activity.time = clock
        chaoslib_process.subprocess = processes
        stopped = _stop.stopping()
        for sig, handler in previous.items():
            if stopped and sig != signal.SIGUSR1:
                _stop.shield()
                signal.signal(sig, interrupt)
            else:
                signal.signal(sig, handler)

    return restore


@contextmanager
def prompt_signals() -> Iterator[None]:
    """:func:`install` for the ``with`` block."""
    restore = install()
    try:
        yield
    finally:
        restore()
