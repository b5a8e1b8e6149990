"""Error kinds of failed requests (connect, dns, timeout, other)."""

from __future__ import annotations

import socket

import httpx

__all__ = ["classify"]


def _caused_by_dns(exc: BaseException) -> bool:
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, socket.gaierror):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def classify(exc: BaseException) -> str:
    """Error kind of a failed request: connect, dns, timeout or other."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "timeout"
    if _caused_by_dns(exc):
        return "dns"
    if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError | OSError):
        return "connect"
    return "other"
