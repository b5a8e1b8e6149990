"""The one stop path of a run: a stop condition, SIGTERM and SIGINT all come here.

:func:`request_stop` (the first call wins and names the cause) does, at once:

* sets the stop event, so a pause slept through :func:`pause` (chaoslib's
  ``pauses.before``/``after``, gameday's settle loop) ends now;
* ends every process group that :func:`run_process` started and that is
  still running (SIGTERM to the group; the process's own call then sends
  SIGKILL after :data:`KILL_GRACE_S`), so a shell's children go with the
  shell, unless the rollbacks have begun (:func:`shield`): a rollback's
  process is never cut short.

Interrupting the main thread itself is the caller's part, and it is only done
where it is safe (:func:`arm`: the main thread is inside chaoslib's run loop,
where an exception becomes "interrupted, rollbacks follow"); elsewhere the stop
is kept and raised at the next safe point (the runner's boundary events).
Every stop, the first and the later ones, is written down with its time, its
cause and the phase it landed in (:func:`note`, :func:`stops`): the journal's
``gameday.stops`` and the timeline read that record.

The causes: ``stop-condition`` (the abort watch), ``SIGTERM``, ``SIGINT``,
``graceful-exit`` (chaoslib's ``exit_gracefully``, SIGUSR1), ``ungraceful-exit``.
The first stop decides; later ones are noted and change nothing.

:func:`run_process` is ``subprocess.run`` with each process in its own session:
the runner gives it to chaoslib's process provider.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import Any

from chaos_ext._core import procfs as _procfs

__all__ = [
    "KILL_GRACE_S",
    "arm",
    "armed",
    "begin_runs",
    "cause",
    "disarm",
    "end_groups",
    "faults_closed",
    "note",
    "pause",
    "phase",
    "request_stop",
    "reset",
    "run_process",
    "runner_owns_interrupts",
    "runs_begun",
    "set_faults_closed",
    "set_phase",
    "shield",
    "shielded",
    "stopping",
    "stops",
    "take_interrupts",
]

KILL_GRACE_S = 1.0
"""Seconds a stopped process group has between SIGTERM and SIGKILL."""


class _StopEvent:
    """``threading.Event`` on a reentrant lock.

    The rule: nothing a signal handler calls may take a non-reentrant lock. Python runs
    a handler in the main thread between any two bytecodes, so also while that thread
    holds the lock the handler needs: inside this event's own ``set`` (a second SIGTERM
    landing in the first one's handler) or ``wait`` (a signal during a pause).
    ``threading.Event`` is built on a plain ``Lock`` and deadlocked there: under
    stress-ng a double SIGTERM, 0 ms apart, left a run hanging for good.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._cond:
            self._flag = True
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._cond:
            if not self._flag:
                self._cond.wait(timeout)
            return self._flag


_EVENT = _StopEvent()
# reentrant for the same rule (a second SIGTERM 0 ms after the first deadlocked a plain Lock)
_LOCK = threading.RLock()
_cause: list[str] = []
_groups: set[int] = set()
_shield: list[bool] = [False]
# the run's state as the stop path needs it (each a one-element list: no rebinding)
_armed: list[bool] = [False]  # the main thread is where a raise is safe
_phase: list[str] = ["set-up"]
_closed: list[bool] = [False]  # the run's last fault has been undone
_owned: list[bool] = [False]  # gameday's runner delivers interrupts (not plain chaos run)
_begun: list[bool] = [False]  # the process has started running experiments
_stops: list[dict[str, Any]] = []


def reset() -> None:
    """A new run: no stop requested yet (process groups still running stay tracked)."""
    with _LOCK:
        _cause.clear()
        _shield[0] = _armed[0] = _closed[0] = False
        _phase[0] = "set-up"
        _stops.clear()
        _EVENT.clear()


def take_interrupts(owned: bool) -> None:
    """gameday's runner delivers the interrupts (its signal handler knows :func:`armed`);
    without it (plain ``chaos run``) the abort control delivers its own."""
    _owned[0] = owned


def runner_owns_interrupts() -> bool:
    return _owned[0]


def begin_runs() -> None:
    """The process has started running experiments: a stop from now on ends a run (or
    keeps the next one from starting), it is no longer "before the run started"."""
    _begun[0] = True


def runs_begun() -> bool:
    return _begun[0]


def arm() -> None:
    """The main thread is inside chaoslib's run loop: an exception raised now becomes
    "interrupted", and the rollbacks follow."""
    _armed[0] = True


def disarm() -> None:
    """The main thread is outside that loop: a stop is kept, not raised."""
    _armed[0] = False


def armed() -> bool:
    return _armed[0]


def set_phase(name: str) -> None:
    """The phase the run is in (settle, before, method, after, rollbacks, sweep, recovery)."""
    _phase[0] = name


def phase() -> str:
    return _phase[0]


def set_faults_closed() -> None:
    """Every fault of the run has been undone: a stop condition firing from now on is
    recorded, and changes nothing."""
    _closed[0] = True


def faults_closed() -> bool:
    return _closed[0]


def note(cause: str, effect: str, *, fired_at: float | None = None, what: str = "") -> None:
    """Write down one stop: its cause, when it came, in which phase, and what it did."""
    entry = {
        "cause": cause,
        "at": round(time.time(), 3),
        "phase": _phase[0],
        "effect": effect,
        "fired_at": None if fired_at is None else round(fired_at, 3),
        "what": what,
    }
    with _LOCK:
        _stops.append(entry)


def stops() -> list[dict[str, Any]]:
    """Every stop written down since the last :func:`reset`, in order."""
    with _LOCK:
        return [dict(s) for s in _stops]


def shield() -> None:
    """The rollbacks have begun: from now on a stop ends pauses only, never a process
    (a rollback's own process must finish), and the run is not interrupted again."""
    with _LOCK:
        _shield[0] = True


def shielded() -> bool:
    """Whether :func:`shield` was called since the last :func:`reset`."""
    with _LOCK:
        return _shield[0]


def stopping() -> bool:
    """Whether a stop was requested since the last :func:`reset`."""
    return _EVENT.is_set()


def cause() -> str | None:
    """What stopped the run first (``"stop-condition"``, ``"SIGTERM"``, ``"SIGINT"``,
    ``"graceful-exit"``), or None."""
    with _LOCK:
        return _cause[0] if _cause else None


def pause(seconds: float) -> None:
    """Sleep ``seconds``, or less if a stop is (or gets) requested."""
    _EVENT.wait(max(0.0, float(seconds)))


def request_stop(why: str, *, end_processes: bool = True) -> bool:
    """Stop the run: end pauses and running process groups. True for the first request
    (the first cause is kept: a later stop never changes it)."""
    with _LOCK:
        first = not _cause
        if first:
            _cause.append(why)
        _EVENT.set()
        rolling_back = _shield[0]
    if end_processes and not rolling_back:
        end_groups(signal.SIGTERM)
    return first


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # the id now belongs to someone else's group: not ours
        return False
    return True


def end_groups(sig: int = signal.SIGTERM) -> int:
    """Send ``sig`` to every tracked process group still running; how many got it."""
    with _LOCK:
        groups = sorted(_groups)
    return sum(_signal_group(pgid, sig) for pgid in groups)


def _end_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM the process's group, SIGKILL what is left after the grace, reap the leader."""
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(proc.pid):
        proc.poll()
        time.sleep(0.02)
    _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL does not take 5 s
        proc.wait(timeout=5)


def _group_alive(pgid: int) -> bool:
    """Whether a live member of the group is left (zombies are not: the container's
    init may never reap a shell's orphaned child, and ``killpg(pgid, 0)`` counts it)."""
    return any(p.pgrp == pgid for p in _procfs.processes())


def run_process(args: Any, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` with the process in its own session, ended as a group.

    On a timeout or an exception (a signal raising KeyboardInterrupt), and on a
    stop (:func:`request_stop`) while it runs, the whole group is ended, not
    just its leader; a group left behind by a process that exited normally is
    left alone (an action may start a background process on purpose). Takes
    what chaoslib's process provider passes: ``timeout``, ``stdout``,
    ``stderr``, ``env``, ``shell``.
    """
    timeout = kwargs.pop("timeout", None)
    kwargs.pop("check", None)
    kwargs["start_new_session"] = True
    with subprocess.Popen(args, **kwargs) as proc:  # chaoslib's own arguments
        with _LOCK:
            _groups.add(proc.pid)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            if stopping() and not shielded() and _group_alive(proc.pid):
                _end_group(proc)  # the leader died of the stop; what ignored SIGTERM goes too
        except BaseException:
            _end_group(proc)
            raise
        finally:
            with _LOCK:
                _groups.discard(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
