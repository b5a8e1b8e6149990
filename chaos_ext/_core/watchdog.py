"""The dead-man switch: one watchdog process per recorded fault, started before it is injected.

A fault recorded with :func:`chaos_ext._core.ledger.fault` gets a watchdog, a small
process (``python -m chaos_ext._core.watchdog_loop``) in its own session, so that a
SIGKILL of the runner, or of its whole process group, does not take it along.
It watches the entry and its owner (the recording process, by pid *and*
kernel start time, as :meth:`Entry.owner_alive` does) and:

* exits as soon as the entry is closed, by anyone;
* never touches the fault while its owner is alive (a stopped owner, SIGSTOP,
  is alive): the owner undoes it itself, its duration's timer included;
* once the owner is dead, undoes the fault at its deadline (a fault with a
  duration: :func:`chaos_ext._core.ledger.undo_after` records it), or ``grace``
  seconds after it first saw the owner dead, whichever comes first; with
  grace 0 (off) only the deadline;
* undoes it through :func:`chaos_ext._core.ledger.undo`, so it and ``gameday
  rollback`` never both undo one entry (the per-entry claim): whoever comes
  first closes it, the other finds it closed and says so.

The grace period is :data:`DEFAULT_GRACE_S` unless set: ``gameday run
--watchdog-grace SECONDS``, the experiment's ``{"name": "gameday",
"watchdog_grace_seconds": N}`` extension, or ``$GAMEDAY_WATCHDOG_GRACE`` (for
plain ``chaos run``); 0 turns the dead-owner undo off (deadlines still hold).

The watchdog is recorded in the entry (``watchdog``: its pid, start time, grace
and deadline) and tagged ``GAMEDAY_WATCHDOG_TOKEN=<entry id>`` in its
environment, which is an exact allowlist, like a helper's. This module only
starts watchdogs and reads the settings; the loop is in
:mod:`chaos_ext._core.watchdog_loop`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.helper import helper_environment
from chaos_ext._core.settings import current_settings
from chaos_ext.errors import ChaosExtError, InvalidArgument

__all__ = [
    "DEFAULT_GRACE_S",
    "GRACE_VARIABLE",
    "MAX_GRACE_S",
    "TOKEN_VAR",
    "find_watchdogs",
    "grace_seconds",
    "parse_grace",
    "set_grace",
    "start_watchdog",
    "stop_watchdog",
]

DEFAULT_GRACE_S = 60.0
"""Seconds a dead owner's untimed fault stays before its watchdog undoes it."""
MAX_GRACE_S = 86400.0
GRACE_VARIABLE = "GAMEDAY_WATCHDOG_GRACE"
TOKEN_VAR = "GAMEDAY_WATCHDOG_TOKEN"  # noqa: S105 - an environment variable name
FAILPOINTS_VARIABLE = "GAMEDAY_WATCHDOG_FAILPOINTS"  # tests: the watchdog's GAMEDAY_FAILPOINTS
MODULE = "chaos_ext._core.watchdog_loop"
#: What a watchdog inherits beyond the helpers' allowlist: where the ledger's marker and
#: state live, and the kubeconfig a Kubernetes undo may need (a path, never its content).
#: The ledger itself and the command's ``--kubeconfig`` are set by :func:`_environment`.
_PASSED = ("GAMEDAY_LEDGER_MARKERS", "XDG_STATE_HOME", "KUBECONFIG")

_lock = threading.Lock()
_grace: float | None = None  # set for a run (gameday run); None: the environment decides


def parse_grace(value: Any, where: str = "watchdog_grace_seconds") -> float:
    """A grace period in seconds (0: off), or InvalidArgument quoting ``value``."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InvalidArgument(
                f"{where}: expected a number of seconds (0: off), got {value!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(f"{where}: expected a number of seconds (0: off), got {value!r}")
    if not 0 <= value <= MAX_GRACE_S:
        raise InvalidArgument(f"{where}: {value:g} is outside 0..{MAX_GRACE_S:g} seconds (0: off)")
    return float(value)


def set_grace(seconds: float | None) -> None:
    """The grace of the faults this process records from now on (None: the environment's)."""
    global _grace  # noqa: PLW0603 - one run per process, read from activity threads
    with _lock:
        _grace = seconds


def grace_seconds() -> float:
    """The grace in force: the run's, else ``$GAMEDAY_WATCHDOG_GRACE``, else the default."""
    with _lock:
        if _grace is not None:
            return _grace
    raw = os.environ.get(GRACE_VARIABLE, "").strip()
    return parse_grace(raw, GRACE_VARIABLE) if raw else DEFAULT_GRACE_S


def _environment(entry_id: str, ledger: Path) -> dict[str, str]:
    """The watchdog's environment, built for it: the allowlist, its entry, its ledger, and the
    command's settings it needs (:mod:`chaos_ext._core.settings`; never the DSN)."""
    env = {**helper_environment(), TOKEN_VAR: entry_id}
    env.update({k: os.environ[k] for k in _PASSED if k in os.environ})
    env["GAMEDAY_LEDGER"] = str(ledger.absolute())
    kubeconfig = current_settings().kubeconfig
    if kubeconfig:
        env["KUBECONFIG"] = kubeconfig
    if os.environ.get(FAILPOINTS_VARIABLE):
        env["GAMEDAY_FAILPOINTS"] = os.environ[FAILPOINTS_VARIABLE]
    return env


def start_watchdog(*, ledger: Path, entry_id: str, owner_pid: int) -> dict[str, Any]:
    """Start the watchdog of ``entry_id`` (not yet recorded); what the entry records of it.

    It waits for the entry to appear, so it is started first and no window is
    left between recording the fault and watching it. Raises ChaosExtError if
    it cannot be started (then nothing must be injected).
    """
    grace = grace_seconds()
    settings = {
        "ledger": str(ledger.absolute()),
        "entry": entry_id,
        "owner_pid": owner_pid,
        "owner_start": _procfs.start_time(owner_pid),
        "grace_seconds": grace,
    }
    log = ledger.parent / "helpers" / f"{entry_id}.watchdog.log"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as errors:
            proc = subprocess.Popen(
                [sys.executable, "-m", MODULE, json.dumps(settings)],
                stdin=subprocess.DEVNULL,
                stdout=errors,
                stderr=errors,
                start_new_session=True,
                env=_environment(entry_id, ledger),
            )
    except OSError as exc:
        raise ChaosExtError(f"cannot start the fault's watchdog: {exc}") from exc
    threading.Thread(target=proc.wait, name=f"reap-watchdog-{proc.pid}", daemon=True).start()
    return {
        "pid": proc.pid,
        "start": _procfs.start_time(proc.pid),
        "grace_seconds": grace,
        "deadline": None,
        "log": str(log),
    }


def stop_watchdog(info: dict[str, Any] | None) -> None:
    """End a watchdog whose entry was never recorded (best effort)."""
    if not info:
        return
    pid, start = int(info.get("pid") or 0), info.get("start")
    if pid and start is not None and _procfs.start_time(pid) == start:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def find_watchdogs(entry_id: str) -> list[int]:
    """Pids of live watchdogs of ``entry_id``."""
    return _procfs.pids_with_environ(f"{TOKEN_VAR}={entry_id}")
