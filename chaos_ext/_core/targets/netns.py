"""Run code inside a network namespace without forking the process.

pyroute2's own namespace support (``IPRoute(netns=...)``, ``netns.create``)
forks the calling process and stops the child with SIGTERM when it is slow;
inside a Chaos Toolkit runner that child inherits the runner's SIGTERM
handler and goes on running the experiment. So chaos_ext enters namespaces
per *thread* instead: a short-lived worker thread calls ``setns(2)`` (or
``unshare(2)`` for a fresh, anonymous namespace), runs the function, and ends.
Sockets created there stay in that namespace; the rest of the process is
never moved.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

from chaos_ext.errors import TransportError

__all__ = ["run_in_netns", "socket_in"]

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _enter(path: str | None) -> None:
    if path is None:
        if _libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise TransportError(f"cannot create a scratch network namespace: {os.strerror(err)}")
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise TransportError(f"cannot enter network namespace {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def run_in_netns(path: str | None, func: Callable[[], T], timeout: float = 120.0) -> T:
    """``func()`` in a thread inside namespace ``path`` (None: a fresh anonymous one).

    A fresh namespace disappears when the thread and its sockets are gone.
    """
    outcome: list[tuple[bool, object]] = []

    def work() -> None:
        try:
            _enter(path)
            outcome.append((True, func()))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=work, name="gameday-netns", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise TransportError(
            f"work in network namespace {path or '(scratch)'} took over {timeout} s"
        )
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)  # noqa: S101 - by construction
        raise value
    return value  # type: ignore[return-value]


def socket_in(path: str, family: int = socket.AF_INET) -> socket.socket:
    """A TCP socket that lives in network namespace ``path``."""
    return run_in_netns(path, lambda: socket.socket(family, socket.SOCK_STREAM), timeout=30)
