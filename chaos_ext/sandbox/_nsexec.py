"""Run a small check inside a network namespace without starting a new Python.

A forked child enters the namespace (setns through pyroute2) and runs the
check; its exit status is the answer. Starting an interpreter per check costs
seconds under an emulated VM; a fork costs milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from pyroute2 import netns

__all__ = ["http_ok", "in_netns", "tcp_open"]


def in_netns(ns: str, check: Callable[[], bool], timeout: float) -> bool:
    """True when ``check()`` returns True inside ``ns`` within ``timeout`` seconds."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            netns.setns(ns)
            code = 0 if check() else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return False


def tcp_open(address: str, port: int, timeout: float = 2.0) -> Callable[[], bool]:
    def check() -> bool:
        try:
            socket.create_connection((address, port), timeout).close()
        except OSError:
            return False
        return True

    return check


def http_ok(url: str, timeout: float = 2.0) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 - sandbox URL
                return 200 <= int(answer.status) < 400
        except (urllib.error.URLError, OSError):
            return False

    return check
