"""A Chaos Toolkit control for tests: it holds chaoslib outside its run loop until the
gameday abort watch has fired (or stopped), so the watch's interrupt is due exactly there.

chaoslib's ``Runner._run`` emits the ``running`` event and logs its strategies before
the ``try`` that handles ``SystemExit``, and plays ``control.end`` (each control's
``after_experiment_control``) after it. A ``SystemExit(20)`` raised in either window
escapes ``Runner.run``: ``chaos run`` then writes no journal at all. Under a busy machine
an abort watch whose first round fires (an alert already firing) lands in the first
window by chance; this control makes it land there every time.

Declare it after ``chaos_ext.controls.abort`` (controls are configured in order, so its
run-event handler comes after the abort watch's). Arguments:

- ``hold``: ``"setup"`` holds the ``running`` event, ``"end"`` holds
  ``after_experiment_control``;
- ``timeout``: seconds to wait at most (the hold never blocks a run for longer);
- ``record``: a file where the hold writes what it saw (``fired``, ``stopped`` or
  ``timeout``), so the test knows the window was really exercised.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from chaoslib.run import RunEventHandler

from chaos_ext.controls import abort

__all__ = ["after_experiment_control", "configure_control"]

_settings: dict[str, Any] = {}


def _fired(journal: Any) -> bool:
    abort_record = ((journal or {}).get("gameday") or {}).get("abort") or {}
    return abort_record.get("fired") is not None


def _hold(record: str, timeout: float, journal: Any) -> None:
    """Wait until the abort watch fired (its verdict is in the journal) or stopped; write
    which (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    seen = "timeout"
    while time.monotonic() < deadline:
        if _fired(journal):
            seen = "fired"
            break
        # under plain chaos run the control's watches are known: a stopped one never fires
        watches = [handler.watch for handler in abort._active if handler.watch is not None]
        if watches and all(w._stop.is_set() for w in watches):
            seen = "stopped"
            break
        time.sleep(0.05)
    # an interrupt delivered during the wait above skips this line: then the record is
    # missing (and so is chaos run's journal)
    Path(record).write_text(seen)


class _HoldRunning(RunEventHandler):  # type: ignore[misc]
    def running(self, experiment: Any, journal: Any, *args: Any, **kwargs: Any) -> None:
        _hold(_settings["record"], _settings["timeout"], journal)


def configure_control(
    event_registry: Any = None,
    hold: str = "setup",
    timeout: float = 30.0,
    record: str = "",
    **kwargs: Any,
) -> None:
    """Register the ``running`` hold (``hold: setup``) or remember the end hold."""
    _settings.update(hold=hold, timeout=float(timeout), record=record)
    if hold == "setup":
        event_registry.register(_HoldRunning())


def after_experiment_control(context: Any, state: Any = None, **kwargs: Any) -> None:
    """``hold: end``: chaoslib's run loop is over; wait here for the watch."""
    if _settings.get("hold") == "end":
        _hold(_settings["record"], _settings["timeout"], state)
