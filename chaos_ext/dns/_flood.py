"""The query flood engine: many queries in flight on non-blocking sockets, one thread.

UDP: ``plan.sockets`` connected sockets (so the server sees several source
ports, like several clients), ids per socket, responses matched by
``(socket, id)``. TCP (``_flood_tcp``): one query at a time per connection,
as CoreDNS's forward plugin does with ``force_tcp``. Both loops stop by
themselves: at ``duration`` or ``max_queries``, then wait at most
``timeout`` for what is still in flight.
"""

from __future__ import annotations

import selectors
import socket
import time
from typing import Any

from chaos_ext.dns._book import Book, FloodPlan
from chaos_ext.dns._wire import classify, with_id
from chaos_ext.errors import DnsError

__all__ = ["run_flood"]

_MAX_WAIT = 0.05
_RECV_BUFFER = 1 << 20


def run_flood(plan: FloodPlan, wires: list[list[bytes]]) -> dict[str, Any]:
    """Run the flood and return its report (counts, rates, latency percentiles)."""
    if plan.protocol == "tcp":
        from chaos_ext.dns._flood_tcp import run_tcp  # noqa: PLC0415 - only for TCP floods

        return run_tcp(plan, wires)
    return _run_udp(plan, wires)


def _udp_sockets(plan: FloodPlan) -> list[socket.socket]:
    family = socket.AF_INET6 if ":" in plan.server else socket.AF_INET
    socks = []
    try:
        for _ in range(plan.sockets):
            sock = socket.socket(family, socket.SOCK_DGRAM)
            socks.append(sock)
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECV_BUFFER)
            sock.connect((plan.server, plan.port))
    except OSError as exc:
        for sock in socks:
            sock.close()
        raise DnsError(f"cannot open UDP sockets to {plan.server}:{plan.port}: {exc}") from exc
    return socks


def _run_udp(plan: FloodPlan, wires: list[list[bytes]]) -> dict[str, Any]:
    socks = _udp_sockets(plan)
    clock = time.monotonic
    book = Book(plan, wires, clock())
    next_id = [0] * len(socks)
    try:
        with selectors.DefaultSelector() as sel:
            for index, sock in enumerate(socks):
                sel.register(sock, selectors.EVENT_READ, index)
            turn = 0
            while True:
                now = clock()
                turn = _send_due(book, socks, next_id, turn, now)
                book.expire(now)
                if book.finished(now):
                    break
                for key, _ in sel.select(_wait(book, now)):
                    _drain(book, key.fileobj, key.data, clock)  # type: ignore[arg-type]
    finally:
        for sock in socks:
            sock.close()
    return book.report(clock() - book.start)


def _wait(book: Book, now: float) -> float:
    """How long select may sleep: until the next send slot, bounded."""
    if book.due(now) > 0 and len(book.inflight) < book.plan.concurrency:
        return 0
    next_slot = book.start + (book.sent + 1) / book.plan.qps
    return min(max(next_slot - now, 0.0), _MAX_WAIT)


def _send_due(
    book: Book, socks: list[socket.socket], next_id: list[int], turn: int, now: float
) -> int:
    room = min(book.due(now), book.plan.concurrency - len(book.inflight))
    count = len(socks)
    wires = book.wires
    inflight = book.inflight
    for _ in range(room):
        name, candidate = book.next_query()
        index = turn
        turn = (turn + 1) % count
        query_id = next_id[index] = (next_id[index] + 1) & 0xFFFF
        key = (index << 16) | query_id
        if key in inflight:
            book.unsent(name, candidate)
            continue
        try:
            socks[index].send(with_id(wires[name][candidate], query_id))
        except BlockingIOError:
            book.unsent(name, candidate)
            break
        except OSError:
            book.counts["error"] += 1
            book.lookups_failed += 1
            continue
        book.sent_query(key, name, candidate, now)
    return turn


def _drain(book: Book, sock: socket.socket, index: int, clock: Any) -> None:
    base = index << 16
    while True:
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:  # ICMP port unreachable on a connected socket, and the like
            book.counts["error"] += 1
            return
        query_id, outcome = classify(data)
        book.answered(base | query_id, outcome, clock())
