"""Small checks from inside a network namespace, without a new process.

A thread enters the namespace (``chaos_ext._core.targets.netns``), opens its socket
there and returns; nothing forks and no interpreter starts (which costs
seconds under an emulated VM).
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Callable

from chaos_ext._core.targets.netns import run_in_netns
from chaos_ext._products.sandbox._netns import ns_path
from chaos_ext.errors import ChaosExtError

__all__ = ["http_ok", "in_netns", "tcp_open"]


def in_netns(ns: str, check: Callable[[], bool], timeout: float) -> bool:
    """True when ``check()`` returns True inside ``ns`` within ``timeout`` seconds."""
    try:
        return bool(run_in_netns(ns_path(ns), check, timeout=timeout))
    except (ChaosExtError, OSError, TimeoutError):
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
