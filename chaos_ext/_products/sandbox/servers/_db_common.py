"""Process plumbing shared by the PostgreSQL and MariaDB launchers.

Free ports, starting a server in its own process group (optionally inside a
network namespace), waiting for it to answer, and stopping it for good.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from chaos_ext._products.sandbox.errors import SandboxError

__all__ = ["free_port", "log_tail", "spawn", "terminate", "wait_until_ready"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now (bind port 0, read it back)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def spawn(argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a server in its own session, stdout and stderr to ``log``."""
    with log.open("ab") as handle:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def log_tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def wait_until_ready(
    proc: subprocess.Popen[bytes],
    probe: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    log: Path,
) -> None:
    """Call ``probe`` until it returns True; raise SandboxError if the server exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SandboxError(
                f"{what} exited with status {proc.returncode} while starting: {log_tail(log)}"
            )
        if probe():
            return
        time.sleep(0.1)
    raise SandboxError(f"{what} not ready within {timeout:g} s: {log_tail(log)}")


def terminate(proc: subprocess.Popen[bytes], sig: signal.Signals, grace: float = 15.0) -> None:
    """Send ``sig`` to the server, wait ``grace`` s, then SIGKILL its whole process group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
