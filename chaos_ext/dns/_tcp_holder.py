"""Helper process: open and hold idle TCP connections to a DNS server.

Run by ``saturate_dnsmasq_tcp`` through :func:`chaos_ext._core.helper.start_helper`
(``python -m chaos_ext.dns._tcp_holder``), tagged with the ledger entry id.
One thread, non-blocking sockets and a selector: 10,000 connections cost a
few MB here (the kernel holds the rest). Connects go out in waves of at most
``CONNECT_WAVE`` pending at once so a small accept backlog is not flooded with SYNs.

With ``query`` set, each connection sends that one query (DNS-over-TCP
framing) and then idles, as a lingering CoreDNS upstream connection does.
Ready report: ``opened``, ``failed``, ``held``, ``answered``, ``pid``,
``rss_kib``. Then it holds until SIGTERM or its own ``hold_seconds`` cap,
closing what the server closes, and exits closing everything.
"""

from __future__ import annotations

import errno
import os
import resource
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from chaos_ext._core import procfs as _procfs
from chaos_ext._core.helper import serve

__all__ = ["CONNECT_WAVE", "open_connections", "raise_fd_limit", "work"]

CONNECT_WAVE = 512  # connects pending at once
_FD_SPARE = 64
_TICK = 0.05


def raise_fd_limit(needed: int) -> int:
    """Raise RLIMIT_NOFILE to ``needed`` (soft, and hard if allowed); returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
        except (OSError, ValueError) as exc:
            raise OSError(f"open files limit is {hard}; {needed} needed ({exc})") from exc
        return needed
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return needed


def _connect_wave(
    family: int, address: tuple[str, int], count: int, deadline: float
) -> tuple[list[socket.socket], int]:
    """Start ``count`` non-blocking connects; return the ones that completed and failures."""
    pending: list[socket.socket] = []
    done: list[socket.socket] = []
    failed = 0
    with selectors.DefaultSelector() as sel:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            if sock.connect_ex(address) not in (0, errno.EINPROGRESS):
                sock.close()
                failed += 1
                continue
            pending.append(sock)
            sel.register(sock, selectors.EVENT_WRITE)
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(max(deadline - time.monotonic(), 0)):
                sock = key.fileobj  # type: ignore[assignment]
                sel.unregister(sock)
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    sock.close()
                    failed += 1
                else:
                    done.append(sock)
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
            failed += 1
    return done, failed


def open_connections(
    server: str, port: int, count: int, timeout: float
) -> tuple[list[socket.socket], int]:
    """Open up to ``count`` TCP connections, each wave given ``timeout`` seconds."""
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    opened: list[socket.socket] = []
    failed = 0
    while len(opened) + failed < count:
        wave = min(CONNECT_WAVE, count - len(opened) - failed)
        done, lost = _connect_wave(family, (server, port), wave, time.monotonic() + timeout)
        opened += done
        failed += lost
        if not done:  # the server takes no more: do not keep knocking for minutes
            failed += count - len(opened) - failed
    return opened, failed


def _send_queries(socks: list[socket.socket], wire: bytes, timeout: float) -> int:
    """Send one framed query per connection; count the connections that got an answer."""
    framed = len(wire).to_bytes(2, "big") + wire
    answered = 0
    with selectors.DefaultSelector() as sel:
        for sock in socks:
            try:
                sock.send(framed)
                sel.register(sock, selectors.EVENT_READ)
            except OSError:
                continue
        deadline = time.monotonic() + timeout
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(max(deadline - time.monotonic(), 0)):
                sel.unregister(key.fileobj)
                answered += 1
                _discard(key.fileobj)  # type: ignore[arg-type]
    return answered


def _discard(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except BlockingIOError:
        return b"\x00"  # nothing to read yet: still open
    except OSError:
        return b""


def _hold(socks: list[socket.socket], stop: threading.Event, deadline: float) -> None:
    """Keep the connections until stopped or the cap; close those the server closes."""
    with selectors.DefaultSelector() as sel:
        for sock in socks:
            sel.register(sock, selectors.EVENT_READ)
        while not stop.is_set() and time.monotonic() < deadline:
            for key, _ in sel.select(min(_TICK, max(deadline - time.monotonic(), 0))):
                if not _discard(key.fileobj):  # type: ignore[arg-type]
                    sel.unregister(key.fileobj)
                    key.fileobj.close()  # type: ignore[union-attr]


def work(
    payload: dict[str, Any], ready: Callable[[dict[str, Any]], None], stop: threading.Event
) -> None:
    """Open, optionally query, report, hold, close (see the module docstring)."""
    deadline = time.monotonic() + float(payload["hold_seconds"])
    count = int(payload["connections"])
    raise_fd_limit(count + _FD_SPARE)
    socks, failed = open_connections(
        str(payload["server"]),
        int(payload["port"]),
        count,
        float(payload["connect_timeout_seconds"]),
    )
    try:
        answered = 0
        if payload.get("query_hex"):
            query = bytes.fromhex(str(payload["query_hex"]))
            answered = _send_queries(socks, query, float(payload["connect_timeout_seconds"]))
        held = sum(1 for sock in socks if _discard(sock))
        ready(
            {
                "opened": len(socks),
                "failed": failed,
                "held": held,
                "answered": answered,
                "pid": os.getpid(),
                "rss_kib": _procfs.rss_kib(os.getpid()),
            }
        )
        _hold(socks, stop, deadline)
    finally:
        for sock in socks:
            sock.close()


if __name__ == "__main__":
    serve(work)
