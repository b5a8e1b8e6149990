"""The query flood engine: many queries in flight on non-blocking sockets, one thread.

UDP: ``plan.sockets`` connected sockets (so the server sees several source
ports, like several clients), ids per socket, responses matched by
``(socket, id)``. TCP (``_flood_tcp``): one query at a time per connection,
as CoreDNS's forward plugin does with ``force_tcp``. Both loops stop by
themselves: at ``duration`` or ``max_queries``, then wait at most
``timeout`` for what is still in flight.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from typing import Any

from chaos_ext._core.percentile import prepare_folding
from chaos_ext.dns._tally import FloodPlan, FloodTally, summarize
from chaos_ext.dns._wire import classify, with_id
from chaos_ext.dns.errors import DnsError

__all__ = ["flood_tally", "run_flood"]

_MAX_WAIT = 0.05
_CHECK_EVERY = 0.002
_RECV_BUFFER = 1 << 20


def run_flood(plan: FloodPlan, wires: list[list[bytes]]) -> dict[str, Any]:
    """Run the flood in this thread and return its report (counts, rates, percentiles)."""
    return summarize([flood_tally(plan, wires)])


def flood_tally(
    plan: FloodPlan, wires: list[list[bytes]], stop: threading.Event | None = None
) -> dict[str, Any]:
    """Run the flood until its caps (or ``stop``); return its raw tally."""
    halt = stop or threading.Event()
    prepare_folding()  # before the clock starts: the first latency fold must not stall the loop
    if plan.protocol == "tcp":
        from chaos_ext.dns._flood_tcp import run_tcp  # noqa: PLC0415 - only for TCP floods

        return run_tcp(plan, wires, halt)
    return _run_udp(plan, wires, halt)


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


def _run_udp(plan: FloodPlan, wires: list[list[bytes]], stop: threading.Event) -> dict[str, Any]:
    socks = _udp_sockets(plan)
    clock = time.monotonic
    book = FloodTally(plan, wires, clock())
    sender = _Sender(book, socks)
    by_fd = {sock.fileno(): (sock, index << 16) for index, sock in enumerate(socks)}
    poller = select.epoll()
    try:
        for fd in by_fd:
            poller.register(fd, select.EPOLLIN)
        next_check = 0.0
        while True:
            now = clock()
            backlog = sender.send_due(now)
            if now >= next_check:  # bookkeeping every few ms, not on every packet
                book.expire(now)
                if book.finished(now) or stop.is_set():
                    break
                next_check = now + _CHECK_EVERY
            for fd, _ in poller.poll(_wait(book, backlog, now)):
                sock, base = by_fd[fd]
                _drain(book, sock, base, clock)
    finally:
        poller.close()
        for sock in socks:
            sock.close()
    return book.tally(clock() - book.start)


def _wait(book: FloodTally, backlog: int, now: float) -> float:
    """How long poll may sleep: for an answer when sends wait on concurrency, else a slot."""
    if backlog > 0:
        return _MAX_WAIT
    next_slot = book.start + (book.sent + 1) / book.plan.qps
    return min(max(next_slot - now, 0.0), _MAX_WAIT)


class _Sender:
    """Round-robin sends over the sockets, ids per socket, keys ``socket << 16 | id``."""

    def __init__(self, book: FloodTally, socks: list[socket.socket]) -> None:
        self.book = book
        self.sends = [sock.send for sock in socks]
        self.next_id = [0] * len(socks)
        self.turn = 0

    def send_due(self, now: float) -> int:
        """Send what the rate allows and concurrency admits; returns how many still wait."""
        book = self.book
        due = book.due(now)
        room = min(due, book.plan.concurrency - len(book.inflight))
        wires, inflight, count = book.wires, book.inflight, len(self.sends)
        for _ in range(room):
            name, candidate = book.next_query()
            index = self.turn
            self.turn = (index + 1) % count
            query_id = self.next_id[index] = (self.next_id[index] + 1) & 0xFFFF
            key = (index << 16) | query_id
            if key in inflight:
                book.unsent(name, candidate)
                continue
            try:
                self.sends[index](with_id(wires[name][candidate], query_id))
            except BlockingIOError:  # on loopback: the server has not read what we sent
                book.unsent(name, candidate)
                book.send_blocked += 1
                break
            except OSError:
                book.send_failed(candidate, now)
                continue
            book.sent_query(key, name, candidate, now)
        return due - room


def _drain(book: FloodTally, sock: socket.socket, base: int, clock: Any) -> None:
    recv, answered = sock.recv, book.answered
    while True:
        try:
            data = recv(4096)
        except BlockingIOError:
            return
        except OSError:  # ICMP port unreachable on a connected socket, and the like
            book.counts["error"] += 1
            return
        query_id, outcome = classify(data)
        answered(base | query_id, outcome, clock())
