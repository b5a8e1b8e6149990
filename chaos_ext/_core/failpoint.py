"""Failpoints: named places where a test makes gameday crash or fail on purpose.

The crash tests set ``GAMEDAY_FAILPOINTS`` to ``name=action`` pairs,
separated by commas, e.g. ``node-drain.after-entry=kill``; the code calls
:func:`failpoint` with that name at that place. Actions:

* ``kill``: SIGKILL this process (a crash: nothing after it runs);
* ``term`` / ``int``: send this process SIGTERM / SIGINT (and go on);
* ``raise``: raise :class:`FailpointHit` (an ActivityFailed: the action fails);
* ``sleep:SECONDS``: stop here that long (to land a signal in a window).

Names are ``<fault kind>.<window>`` with the windows ``before-entry``,
``after-entry``, ``mid-apply``, ``after-apply``, ``mid-undo``, plus
``ledger.after-log`` (between the event log and the database),
``ledger.after-commit``,
``undo.before-close`` and ``helper.started``. A fault's watchdog process
(:mod:`chaos_ext._core.watchdog`) does not inherit them: ``GAMEDAY_WATCHDOG_FAILPOINTS``
gives it its own. Unset (always, outside tests)
it costs one environment lookup. Hand-written rather than a library: the
Python failpoint packages on PyPI are unmaintained and inject by
monkeypatching, which would not reach a ``gameday`` subprocess.
"""

from __future__ import annotations

import os
import signal
import time

from chaos_ext.errors import ChaosExtError

__all__ = ["FailpointHit", "failpoint"]

VARIABLE = "GAMEDAY_FAILPOINTS"


class FailpointHit(ChaosExtError):
    """A failpoint set to ``raise`` was reached (tests only)."""


def _actions() -> dict[str, str]:
    raw = os.environ.get(VARIABLE, "")
    pairs = (item.split("=", 1) for item in raw.split(",") if "=" in item)
    return {name.strip(): action.strip() for name, action in pairs}


def failpoint(name: str) -> None:
    """Crash, fail or pause here if ``GAMEDAY_FAILPOINTS`` says so for ``name``."""
    if VARIABLE not in os.environ:
        return
    action = _actions().get(name)
    if not action:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)  # never returns: the signal is delivered at once
    elif action in ("term", "int"):
        os.kill(os.getpid(), signal.SIGTERM if action == "term" else signal.SIGINT)
    elif action == "raise":
        raise FailpointHit(f"failpoint {name} reached")
    elif action.startswith("sleep:"):
        time.sleep(float(action.split(":", 1)[1]))
