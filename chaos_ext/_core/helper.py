"""Helper processes that hold a fault (connections, load) outside the runner.

A helper is ``python -m <module>`` started in its own session with
``GAMEDAY_HELPER_TOKEN=<ledger entry id>`` in its environment. It reads a JSON
payload on stdin, does its work, reports readiness as one JSON line on stdout,
then holds until its own time cap or SIGTERM. It therefore survives a SIGKILL
of the runner (the fault stays as recorded) and is found again by the token:
:func:`stop_helpers` scans ``/proc`` for it, so the ledger's undo works from
any later process (``gameday rollback``), even if the pid was never recorded.

Child side: a helper module's ``__main__`` calls :func:`serve` with a function
``work(payload, ready, stop)`` that calls ``ready({...})`` once and returns when
``stop`` is set or its time cap elapses.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.failpoint import failpoint
from chaos_ext.errors import ChaosExtError

__all__ = [
    "HELPER_ENV_ALLOWLIST",
    "HelperHandle",
    "all_helpers",
    "find_helpers",
    "helper_environment",
    "serve",
    "start_helper",
    "stop_helpers",
]

TOKEN_VAR = "GAMEDAY_HELPER_TOKEN"  # noqa: S105 - an environment variable name

Work = Callable[[dict[str, Any], Callable[[dict[str, Any]], None], threading.Event], None]


@dataclass(frozen=True)
class HelperHandle:
    """A started helper: its pid and what it reported when ready."""

    pid: int
    token: str
    ready: dict[str, Any]


def start_helper(
    *, module: str, payload: dict[str, Any], token: str, ready_timeout: float
) -> HelperHandle:
    """Start ``python -m module`` and wait for its ready line.

    Raises ChaosExtError (after killing the helper) when it reports an error,
    exits, or is not ready within ``ready_timeout`` seconds.
    """
    env = {**helper_environment(), TOKEN_VAR: token}
    log = helper_log(token)
    with log.open("ab") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            start_new_session=True,
            env=env,
        )
    assert proc.stdin is not None and proc.stdout is not None  # noqa: S101 - pipes requested
    try:
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
        failpoint("helper.started")
        try:
            line = _read_line(proc, ready_timeout)
            report = json.loads(line) if line else {"error": f"helper exited with {proc.poll()}"}
        except (TimeoutError, json.JSONDecodeError) as exc:
            report = {"error": f"helper not ready: {exc}"}
        finally:
            proc.stdout.close()
    except BaseException:
        # The helper is ended by its pid, not only by its token: right after exec the kernel
        # may not show the new environment in /proc/<pid>/environ yet, so a token lookup then
        # finds nothing (seen under stress-ng: the undo of a failed start found no helper and
        # the helper went on to hold its connections).
        _kill_started(proc, token)
        raise
    if "error" in report:
        _kill_started(proc, token)
        tail = _tail(log)
        raise ChaosExtError(str(report["error"]) + (f" ({tail})" if tail else ""))
    return HelperHandle(pid=proc.pid, token=token, ready=report)


def _kill_started(proc: subprocess.Popen[bytes], token: str) -> None:
    """End a helper this process started and never handed over: its session (SIGTERM, then
    SIGKILL after 3 s, as :func:`stop_helpers`), then anything else with its token."""
    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)  # start_new_session: its group is its pid
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
            break
    stop_helpers(token)  # anything it started that left its session


#: Every variable a helper may inherit, by exact name. No prefix is passed through:
#: operators keep secrets in variables such as GAMEDAY_DB_PASSWORD.
HELPER_ENV_ALLOWLIST = frozenset(
    {"PATH", "PYTHONPATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}
)


def helper_environment() -> dict[str, str]:
    """The environment a helper gets: :data:`HELPER_ENV_ALLOWLIST`, never the runner's whole one.

    A helper outlives the runner and its environment is readable in /proc:
    secrets the runner read from environment variables must not travel there.
    Secrets a helper needs go in its stdin payload; the token is added by
    :func:`start_helper`.
    """
    return {key: value for key, value in os.environ.items() if key in HELPER_ENV_ALLOWLIST}


def helper_log(token: str) -> Path:
    """Where a helper's stderr goes: ``<ledger folder>/helpers/<token>.log``."""
    from chaos_ext._core.ledger import ledger_path  # noqa: PLC0415 - keeps this module import-light

    folder = ledger_path().parent / "helpers"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{token}.log"


def _tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    assert proc.stdout is not None  # noqa: S101 - pipe requested
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no ready line within {timeout:.0f} s")
            if not sel.select(left):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
    return buf.split(b"\n", 1)[0].decode()


def find_helpers(token: str) -> list[int]:
    """Pids of live processes started with this helper token."""
    return _procfs.pids_with_environ(f"{TOKEN_VAR}={token}")


def all_helpers() -> dict[str, list[int]]:
    """``{token: pids}`` of every live helper on this machine (any token, any ledger)."""
    found: dict[str, list[int]] = {}
    for pid, token in sorted(_procfs.environ_values(TOKEN_VAR).items()):
        if token and _procfs.alive(pid):
            found.setdefault(token, []).append(pid)
    return found


def stop_helpers(token: str, grace: float = 3.0) -> int:
    """SIGTERM every helper with ``token``, SIGKILL what is left after ``grace``.

    Returns how many were found. Idempotent: none found is fine.
    """
    pids = find_helpers(token)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    failpoint("helper.stopping")
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_procfs.alive(pid) for pid in pids):
        time.sleep(0.02)
    for pid in pids:
        if _procfs.alive(pid):
            _signal(pid, signal.SIGKILL)
    for pid in pids:
        _reap(pid)
    return len(pids)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _reap(pid: int) -> None:
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # not our child: its own parent (or init) reaps it
        if done:
            return
        time.sleep(0.01)


def serve(work: Work) -> None:
    """Child side: run ``work`` with the stdin payload; report errors as the ready line."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner's Ctrl-C is not ours
    reported = False

    def ready(report: dict[str, Any]) -> None:
        nonlocal reported
        if reported:
            return
        reported = True
        try:
            sys.stdout.write(json.dumps(report) + "\n")
            sys.stdout.flush()
            sys.stdout.close()
        except OSError:
            pass  # the runner is gone; keep holding until undone or the cap

    try:
        payload = json.loads(sys.stdin.read() or "{}")
        work(payload, ready, stop)
    except Exception as exc:  # noqa: BLE001 - the only channel back is the ready line
        ready({"error": f"{type(exc).__name__}: {exc}"})
        raise SystemExit(1) from None
    ready({"error": "helper finished without reporting ready"})
