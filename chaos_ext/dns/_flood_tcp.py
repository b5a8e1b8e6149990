"""TCP transport of the flood: a pool of connections, one query in flight on each.

This is how NodeLocal DNSCache (CoreDNS ``forward`` with ``force_tcp``)
talks to kube-dns: DNS-over-TCP framing (a 2-byte length before each
message, RFC 1035 §4.2.2), connections reused. A connection that times out
or is closed by the server is dropped (its query counts as a timeout or an
error) and reopened after a short pause, as a client would.
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from chaos_ext.dns._tally import FloodPlan, FloodTally
from chaos_ext.dns._wire import classify, with_id

__all__ = ["run_tcp"]

_MAX_WAIT = 0.05
_REOPEN_PAUSE = 0.05


@dataclass
class _Conn:
    index: int
    sock: socket.socket | None = None
    connected: bool = False
    key: int | None = None
    query_id: int = 0
    reopen_at: float = 0.0
    buffer: bytearray = field(default_factory=bytearray)


class _Pool:
    def __init__(self, book: FloodTally, sel: selectors.BaseSelector) -> None:
        self.book = book
        self.sel = sel
        self.family = socket.AF_INET6 if ":" in book.plan.server else socket.AF_INET
        self.conns = [_Conn(i) for i in range(book.plan.concurrency)]
        self.idle: list[_Conn] = []
        self.connections_opened = 0

    def open(self, conn: _Conn, now: float) -> None:
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex((self.book.plan.server, self.book.plan.port))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.book.counts["error"] += 1
            conn.reopen_at = now + _REOPEN_PAUSE
            return
        conn.sock, conn.connected, conn.buffer = sock, False, bytearray()
        self.connections_opened += 1
        self.sel.register(sock, selectors.EVENT_WRITE, conn)

    def drop(self, conn: _Conn, outcome: str, now: float) -> None:
        if conn.key is not None:
            self.book.failed(conn.key, outcome)
            conn.key = None
        if conn.sock is not None:
            self.sel.unregister(conn.sock)
            conn.sock.close()
            conn.sock = None
        if conn in self.idle:
            self.idle.remove(conn)
        conn.connected = False
        conn.reopen_at = now + _REOPEN_PAUSE

    def reopen_due(self, now: float) -> None:
        if self.book.due(now) <= 0:
            return
        for conn in self.conns:
            if conn.sock is None and conn.reopen_at <= now:
                self.open(conn, now)

    def event(self, conn: _Conn, mask: int, now: float) -> None:
        if conn.sock is None:
            return
        if not conn.connected and mask & selectors.EVENT_WRITE:
            if conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.book.counts["error"] += 1
                self.drop(conn, "error", now)
                return
            conn.connected = True
            self.sel.modify(conn.sock, selectors.EVENT_READ, conn)
            self.idle.append(conn)
            return
        self.receive(conn, now)

    def receive(self, conn: _Conn, now: float) -> None:
        assert conn.sock is not None  # noqa: S101 - checked by the caller
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # closed by the server (dnsmasq: after 100 queries): ask again elsewhere
            if conn.key is not None:
                self.book.retry(conn.key)
                conn.key = None
            self.drop(conn, "error", now)
            return
        conn.buffer += data
        while len(conn.buffer) >= 2:
            size = int.from_bytes(conn.buffer[:2], "big")
            if len(conn.buffer) < 2 + size:
                return
            message = bytes(conn.buffer[2 : 2 + size])
            del conn.buffer[: 2 + size]
            query_id, outcome = classify(message)
            if conn.key is not None and query_id == conn.key & 0xFFFF:
                self.book.answered(conn.key, outcome, now)
                conn.key = None
                self.idle.append(conn)

    def send_due(self, now: float) -> None:
        book = self.book
        for _ in range(min(book.due(now), len(self.idle))):
            conn = self.idle.pop()
            assert conn.sock is not None  # noqa: S101 - idle connections are open
            name, candidate = book.next_query()
            wire = book.wires[name][candidate]
            conn.query_id = (conn.query_id + 1) & 0xFFFF
            key = (conn.index << 16) | conn.query_id
            try:
                sent = conn.sock.send(len(wire).to_bytes(2, "big") + with_id(wire, conn.query_id))
            except OSError:
                sent = 0
            if sent != len(wire) + 2:
                book.unsent(name, candidate)
                self.drop(conn, "error", now)
                continue
            conn.key = key
            book.sent_query(key, name, candidate, now)

    def close(self) -> None:
        for conn in self.conns:
            if conn.sock is not None:
                conn.sock.close()


def run_tcp(plan: FloodPlan, wires: list[list[bytes]], stop: threading.Event) -> dict[str, Any]:
    """Run a TCP flood; its tally adds ``connections_opened``."""
    clock = time.monotonic
    book = FloodTally(plan, wires, clock())
    with selectors.DefaultSelector() as sel:
        pool = _Pool(book, sel)
        try:
            for conn in pool.conns:
                pool.open(conn, book.start)
            while True:
                now = clock()
                pool.send_due(now)
                for expired in book.expire(now):
                    pool.drop(pool.conns[expired >> 16], "timeout", now)
                if book.finished(now) or stop.is_set():
                    break
                pool.reopen_due(now)
                for key, mask in sel.select(_wait(book, pool, now)):
                    pool.event(key.data, mask, clock())
        finally:
            pool.close()
    return {**book.tally(clock() - book.start), "connections_opened": pool.connections_opened}


def _wait(book: FloodTally, pool: _Pool, now: float) -> float:
    if pool.idle and book.due(now) > 0:
        return 0
    next_slot = book.start + (book.sent + 1) / book.plan.qps
    return min(max(next_slot - now, 0.001), _MAX_WAIT)
