"""SIGTERM and SIGINT end a run promptly, whatever pause is pending.

chaoslib sleeps an activity's ``pauses.after`` inside a ``finally`` (its flag
meant to skip the pause when interrupted is never set), so a signal that
lands in an action still waits out the whole pause before the rollbacks:
32-35 s after a SIGTERM with a 30 s pause, past Kubernetes' default 30 s
grace period. While a run is under :func:`prompt_signals`:

* SIGTERM and SIGINT raise KeyboardInterrupt where they land (chaoslib wraps
  any Exception raised in a Python activity into a failed activity, so
  nothing else would stop the method), and
* chaoslib's pauses are slept on an event that the first signal sets, so a
  pause pending or in progress ends at once; rollback pauses are skipped too.

The rollback itself then runs shielded (:func:`chaos_ext.runner.sweep.shielded`).
The budget from the signal to the journal on disk is :data:`SIGNAL_EXIT_BUDGET_S`;
:data:`TERMINATION_GRACE_S` is what a pod running gameday needs
(``terminationGracePeriodSeconds`` of ``gameday schedule``'s CronJob).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from chaoslib import activity as chaoslib_activity

__all__ = [
    "SIGNAL_EXIT_BUDGET_S",
    "TERMINATION_GRACE_S",
    "install",
    "interrupt",
    "interrupted",
    "prompt_signals",
]

SIGNAL_EXIT_BUDGET_S = 10
"""Seconds from SIGTERM/SIGINT to the run's exit with its journal written (tested)."""

TERMINATION_GRACE_S = 120
"""A pod's grace period: the exit budget, plus the rollback of every fault kind at its
slowest (each Kubernetes call may take its 5 s connect + 30 s read timeout), plus the
report; Kubernetes' default of 30 s is too short once an API server is slow."""

_STOP = threading.Event()


class _PauseClock:
    """``time`` as chaoslib.activity sees it: the same, except that sleep ends at a signal."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        _STOP.wait(max(0.0, float(seconds)))


def interrupted() -> bool:
    """Whether the run has received SIGTERM or SIGINT."""
    return _STOP.is_set()


def interrupt(signum: int, frame: FrameType | None) -> None:
    """The run's SIGTERM/SIGINT handler: end pauses, raise KeyboardInterrupt here."""
    _STOP.set()
    # KeyboardInterrupt, not chaoslib's InterruptExecution: chaoslib wraps every
    # Exception raised inside a Python activity into a failed activity and goes
    # on with the method, so a SIGTERM landing in an activity would be lost.
    raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")


def install() -> Callable[[], None]:
    """Install :func:`interrupt` and the interruptible pauses; returns what undoes it."""
    _STOP.clear()
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    clock = chaoslib_activity.time
    chaoslib_activity.time = _PauseClock()

    def restore() -> None:
        chaoslib_activity.time = clock
        for sig, handler in previous.items():
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
