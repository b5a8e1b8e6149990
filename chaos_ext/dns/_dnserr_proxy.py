"""Helper process: a DNS proxy that answers matching queries with an error, forwards the rest.

Started by ``inject_dns_errors`` through :func:`chaos_ext._core.helper.start_helper`
(``python -m chaos_ext.dns._dnserr_proxy``), tagged with the ledger entry id.
It first enters the target's network namespace (``setns``), binds one UDP
and one TCP port (the same number) on loopback per resolver, reports
``{"ports": {resolver: port}, "pid": ...}`` and serves until SIGTERM or its
own cap; on its way out it calls ``on_exit`` (which deletes its nftables
table and forgets its conntrack entries), so a redirect to a dead port is
never left behind.

The serving part is standard library only (with
:mod:`chaos_ext.dns._dnserr_wire`, it could run on a node's own python3):
one non-blocking epoll loop, no thread per query. Pass-through
queries are forwarded as raw bytes on one upstream socket per resolver
(marked with ``SO_MARK`` so our nftables rule lets it through), their query
id remapped and restored: the client gets the resolver's answer byte for
byte. Matching queries get an answer built here from the query's header
and question (QR and RA set, the error's RCODE, no records; ``random-ip``
adds one A or AAAA record) or, for ``timeout``, nothing at all.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import random
import resource
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from chaos_ext.dns._dnserr_wire import PASS, Decider

__all__ = ["Proxy", "enter_netns", "main", "work"]

CLONE_NEWNET = 0x40000000
SO_MARK = getattr(socket, "SO_MARK", 36)
_EXPIRY = 10.0  # seconds an unanswered forwarded query is remembered
_BATCH = 64  # datagrams read per readiness event before others get a turn
_MAX_TCP = 1024
_TICK = 0.2


def enter_netns(path: str) -> None:
    """Move this (single-threaded) process into the network namespace at ``path``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def _loopback(resolver: str) -> tuple[int, str]:
    return (socket.AF_INET6, "::1") if ":" in resolver else (socket.AF_INET, "127.0.0.1")


def _bind_pair(resolver: str) -> tuple[socket.socket, socket.socket]:
    """A UDP and a listening TCP socket on loopback, on the same free port."""
    family, address = _loopback(resolver)
    for _ in range(50):
        udp = socket.socket(family, socket.SOCK_DGRAM)
        udp.bind((address, 0))
        tcp = socket.socket(family, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            tcp.bind((address, udp.getsockname()[1]))
        except OSError:
            udp.close()
            tcp.close()
            continue
        tcp.listen(256)
        for sock in (udp, tcp):
            sock.setblocking(False)
        return udp, tcp
    raise OSError(f"no port free for both UDP and TCP on {address}")


def _upstream(resolver: str, port: int, mark: int, kind: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in resolver else socket.AF_INET
    sock = socket.socket(family, kind)
    sock.setsockopt(socket.SOL_SOCKET, SO_MARK, mark)
    sock.setblocking(False)
    return sock


class _Route:
    """One resolver: its loopback sockets, its upstream UDP socket, the queries in flight."""

    def __init__(self, resolver: str, dport: int, mark: int) -> None:
        self.resolver, self.dport, self.mark = resolver, dport, mark
        self.udp, self.tcp = _bind_pair(resolver)
        # not connected: a resolver that cannot be reached now (no route) fails its queries,
        # as it would without us, instead of the whole injection
        self.up = _upstream(resolver, dport, mark, socket.SOCK_DGRAM)
        self.address = (resolver, dport)
        self.next_id = random.randrange(65536)  # noqa: S311 - ids, not secrets
        self.pending: dict[int, tuple[Any, bytes, bytes, float]] = {}

    def forward(self, wire: bytes, end: int, client: Any, now: float) -> None:
        new_id = self.next_id = (self.next_id + 1) & 0xFFFF
        self.pending[new_id] = (client, wire[:2], wire[12:end], now)
        with contextlib.suppress(OSError):  # unreachable, refused, full: the client times out
            self.up.sendto(new_id.to_bytes(2, "big") + wire[2:], self.address)

    def answer(self, reply: bytes) -> None:
        if len(reply) < 12:
            return
        found = self.pending.pop(int.from_bytes(reply[:2], "big"), None)
        if found is None:
            return
        client, old_id, question, _ = found
        if question and reply[4:6] != b"\x00\x00" and reply[12 : 12 + len(question)] != question:
            return  # not the question we forwarded (a late answer for a reused id)
        with contextlib.suppress(BlockingIOError, OSError):
            self.udp.sendto(old_id + reply[2:], client)

    def expire(self, now: float) -> None:
        old = [key for key, item in self.pending.items() if now - item[3] > _EXPIRY]
        for key in old:
            del self.pending[key]


class _Stream:
    """One client TCP connection and its own upstream connection (opened at accept)."""

    def __init__(self, client: socket.socket, route: _Route) -> None:
        self.client, self.route = client, route
        self.up = _upstream(route.resolver, route.dport, route.mark, socket.SOCK_STREAM)
        code = self.up.connect_ex((route.resolver, route.dport))
        if code not in (0, errno.EINPROGRESS):
            raise OSError(code, os.strerror(code))
        self.from_client = bytearray()
        self.from_up = bytearray()
        self.to_client = bytearray()
        self.to_up = bytearray()


def _frames(buffer: bytearray) -> list[bytes]:
    """Complete length-prefixed DNS messages taken off the front of ``buffer``."""
    found = []
    while len(buffer) >= 2:
        size = int.from_bytes(buffer[:2], "big")
        if len(buffer) < 2 + size:
            break
        found.append(bytes(buffer[2 : 2 + size]))
        del buffer[: 2 + size]
    return found


class Proxy:
    """The serving loop over every route (see the module docstring)."""

    def __init__(self, resolvers: list[str], dport: int, mark: int, decide: Decider) -> None:
        self.decide = decide
        self.routes = [_Route(r, dport, mark) for r in resolvers]
        self.poll = select.epoll()
        self.handlers: dict[int, Callable[[int], None]] = {}
        self.masks: dict[int, int] = {}  # what epoll watches per descriptor
        self.streams: dict[int, _Stream] = {}
        for route in self.routes:
            self._watch(route.udp, functools.partial(self._on_query, route))
            self._watch(route.up, functools.partial(self._on_reply, route))
            self._watch(route.tcp, functools.partial(self._on_accept, route))

    def ports(self) -> dict[str, int]:
        return {route.resolver: route.udp.getsockname()[1] for route in self.routes}

    def _watch(self, sock: socket.socket, handler: Callable[[int], None], mask: int = 0) -> None:
        self.poll.register(sock.fileno(), mask or select.EPOLLIN)
        self.masks[sock.fileno()] = mask or select.EPOLLIN
        self.handlers[sock.fileno()] = handler

    def _forget(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.poll.unregister(sock.fileno())
        self.handlers.pop(sock.fileno(), None)
        self.masks.pop(sock.fileno(), None)
        sock.close()

    def _on_query(self, route: _Route, _events: int) -> None:
        now = time.monotonic()
        for _ in range(_BATCH):
            try:
                wire, client = route.udp.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            verdict, end = self.decide(wire)
            if verdict is PASS:
                route.forward(wire, end, client, now)
            elif verdict:
                with contextlib.suppress(BlockingIOError, OSError):
                    route.udp.sendto(verdict, client)

    def _on_reply(self, route: _Route, _events: int) -> None:
        for _ in range(_BATCH):
            try:
                reply, source = route.up.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                continue  # an ICMP error for an earlier query: the client times out, as it would
            if source[:2] == route.address:  # only the resolver's own answers
                route.answer(reply)

    def _on_accept(self, route: _Route, _events: int) -> None:
        try:
            client, _ = route.tcp.accept()
        except OSError:  # nothing to accept, or out of file descriptors: the client retries
            return
        if len(self.streams) >= _MAX_TCP:
            client.close()
            return
        client.setblocking(False)
        try:
            stream = _Stream(client, route)
        except OSError:
            client.close()
            return
        self.streams[client.fileno()] = stream
        self._watch(client, functools.partial(self._on_client, stream))
        self._watch(stream.up, functools.partial(self._on_up, stream), select.EPOLLOUT)

    def _close(self, stream: _Stream) -> None:
        self.streams.pop(stream.client.fileno(), None)
        self._forget(stream.client)
        self._forget(stream.up)

    def _flush(self, sock: socket.socket, buffer: bytearray) -> bool:
        """Send what ``buffer`` holds; False if the connection is broken."""
        try:
            while buffer:
                del buffer[: sock.send(buffer)]
        except BlockingIOError:
            pass
        except OSError:
            return False
        mask = select.EPOLLIN | (select.EPOLLOUT if buffer else 0)
        if self.masks.get(sock.fileno()) != mask:  # a syscall only when the interest changes
            self.masks[sock.fileno()] = mask
            with contextlib.suppress(OSError):
                self.poll.modify(sock.fileno(), mask)
        return True

    def _read(self, sock: socket.socket, into: bytearray) -> bool:
        try:
            data = sock.recv(65535)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        into += data
        return bool(data)

    def _on_client(self, stream: _Stream, events: int) -> None:
        alive = True
        if events & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
            alive = self._read(stream.client, stream.from_client)
            for wire in _frames(stream.from_client):
                verdict, _ = self.decide(wire)
                if verdict is PASS:
                    stream.to_up += len(wire).to_bytes(2, "big") + wire
                elif verdict:
                    stream.to_client += len(verdict).to_bytes(2, "big") + verdict
            alive = alive and self._flush(stream.up, stream.to_up)
        alive = alive and self._flush(stream.client, stream.to_client)
        if not alive:
            self._close(stream)

    def _on_up(self, stream: _Stream, events: int) -> None:
        failed = events & select.EPOLLERR  # a failed connect, or a reset
        alive = not (failed and stream.up.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
        if alive and events & (select.EPOLLIN | select.EPOLLHUP):
            alive = self._read(stream.up, stream.from_up)
            for wire in _frames(stream.from_up):
                stream.to_client += len(wire).to_bytes(2, "big") + wire
            alive = self._flush(stream.client, stream.to_client) and alive
        alive = alive and self._flush(stream.up, stream.to_up)
        if not alive:
            self._close(stream)

    def serve(self, stop: threading.Event, deadline: float) -> None:
        last_expiry = time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                return
            for fd, events in self.poll.poll(min(_TICK, deadline - now)):
                handler = self.handlers.get(fd)
                if handler is not None:
                    handler(events)
            if now - last_expiry > 1.0:
                last_expiry = now
                for route in self.routes:
                    route.expire(now)

    def close(self) -> None:
        for stream in list(self.streams.values()):
            self._close(stream)
        for route in self.routes:
            for sock in (route.udp, route.tcp, route.up):
                self._forget(sock)
        self.poll.close()


def work(
    payload: dict[str, Any],
    ready: Callable[[dict[str, Any]], None],
    stop: threading.Event,
    on_exit: Callable[[dict[str, Any], list[int]], None] | None = None,
) -> None:
    """Enter the namespace, bind, report, serve until stopped or the cap, clean up."""
    deadline = time.monotonic() + float(payload["cap_seconds"])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4 * _MAX_TCP if hard == resource.RLIM_INFINITY else min(hard, 4 * _MAX_TCP)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))  # 2 per TCP client
    if payload.get("netns"):
        enter_netns(str(payload["netns"]))
    decide = Decider(str(payload["regex"]), str(payload["error"]), int(payload["percent"]))
    proxy = Proxy(list(payload["resolvers"]), int(payload["port"]), int(payload["mark"]), decide)
    ports = proxy.ports()
    try:
        ready({"ports": ports, "pid": os.getpid()})
        proxy.serve(stop, deadline)
    finally:
        proxy.close()
        if on_exit is not None:
            on_exit(payload, sorted(ports.values()))


def main() -> None:
    """Entry point on this machine: the helper protocol, and our cleanup on the way out."""
    from chaos_ext._core.helper import serve  # noqa: PLC0415 - the serving part is stdlib only
    from chaos_ext.dns._dnserr_system import cleanup_here  # noqa: PLC0415

    serve(lambda payload, ready, stop: work(payload, ready, stop, on_exit=cleanup_here))


if __name__ == "__main__":
    main()
