"""HTTP/1.1 keep-alive client for the load workers: asyncio protocols + httptools.

Why not aiohttp here: measured on this project's machines, aiohttp spends
about 110 µs of CPU per request, wrk about 14 µs; a bare asyncio protocol on
uvloop that parses responses with httptools (llhttp, Node.js's parser, by the
uvloop authors) spends about 14 µs as well. A load generator's capacity is
its CPU per request, so HTTP/1.1 loads use this small client and HTTP/2 uses
httpx (see ``_clients``).

What it does, and only that: one request at a time per connection (no
pipelining), at most ``limit`` connections, requests prebuilt per URL
(method, path, Host, the spec's headers, Content-Length and body), the
response parsed by httptools and its body discarded. Connections are reused
while the server keeps them alive; a close-delimited body ends at EOF.
Redirects are never followed. Timeouts are checked every ~20 ms: a request
past its deadline has its connection aborted and counts as ``timeout``.
Callback style (no task or future per request) keeps the cost per request low.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from chaos_ext.load._classify import classify
from chaos_ext.load.spec import LoadSpec, check_header_fields

__all__ = ["Done", "Http1Client", "build_request", "tls_context"]

# done(context, sent_at, ended_at, status or None, kind): times are monotonic; kind is the
# error kind when there is no status, else the cause header's value (or None)
Done = Callable[[Any, float, float, int | None, str | None], None]


def build_request(method: str, url: str, headers: dict[str, str], body: str) -> bytes:
    """The bytes of one HTTP/1.1 request to ``url``.

    Header names and values are checked again here (InvalidArgument), whatever
    built the spec: a CR/LF must never reach the wire as a line break.
    """
    check_header_fields(headers)
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}"]
    names = {name.lower() for name in headers}
    if "user-agent" not in names:
        lines.append("User-Agent: gameday-load/1")
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    data = body.encode()
    if data or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def tls_context(spec: LoadSpec) -> ssl.SSLContext:
    """Certificates are verified, against ``spec.ca_file`` if given, else the system's CAs."""
    return ssl.create_default_context(cafile=spec.ca_file or None)


class _Origin:
    """Where a URL's connections go, and its idle ones."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.idle: deque[_Conn] = deque()


class _Conn(asyncio.Protocol):
    __slots__ = (
        "cause",
        "client",
        "context",
        "deadline",
        "head",
        "headers_done",
        "origin",
        "parser",
        "received_at",
        "sent_at",
        "timed_out",
        "transport",
    )

    def __init__(self, client: Http1Client, origin: _Origin) -> None:
        self.client, self.origin = client, origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.context: Any = None
        self.sent_at = self.deadline = self.received_at = 0.0
        self.headers_done = self.timed_out = False
        self.head = client.method == "HEAD"
        self.cause: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def send(self, context: Any, data: bytes) -> None:
        self.context = context
        self.headers_done = False
        self.cause = None
        if self.head:  # a HEAD response has no body: a fresh parser per request
            self.parser = httptools.HttpResponseParser(self)
        self.sent_at = time.monotonic()
        self.deadline = self.sent_at + self.client.timeout
        if self.transport is None:  # closed by the server between connect and send
            self._fail("connect")
            return
        self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.received_at = time.monotonic()  # the answer is here: parsing is not its latency
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail("other")
            self.close()

    def on_headers_complete(self) -> None:
        self.headers_done = True
        if self.head:
            self.on_message_complete()

    def on_message_complete(self) -> None:
        if self.context is None:
            return
        status = self.parser.get_status_code()
        if status < 200 and not self.head:  # 1xx (e.g. 103 Early Hints): the answer follows
            self.headers_done = False
            return
        context, self.context = self.context, None
        keep = self.parser.should_keep_alive()
        self.client.finished(self, context, status, keep)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.client.lost(self)
        if self.context is None:
            return
        if self.timed_out:
            self._fail("timeout")
        elif exc is None and self.headers_done:  # a body delimited by the end of the connection
            self.on_message_complete()
        else:
            self._fail("connect")

    def _fail(self, kind: str) -> None:
        self.client.busy.discard(self)
        if self.context is not None:
            context, self.context = self.context, None
            self.client.done(context, self.sent_at, time.monotonic(), None, kind)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class _CauseConn(_Conn):
    """A connection that also reads the load's cause header (httptools calls
    ``on_header`` only where it exists: loads without a cause header pay nothing)."""

    __slots__ = ()

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == self.client.cause_header:
            self.cause = value.decode("latin-1")[:64]


class Http1Client:
    """Up to ``limit`` keep-alive connections; ``launch`` sends, ``done`` is called back."""

    def __init__(self, spec: LoadSpec, limit: int, done: Done) -> None:
        self.loop = asyncio.get_running_loop()
        self.limit, self.done, self.timeout = limit, done, spec.timeout
        self.cause_header = spec.cause_header.lower().encode("latin-1")
        self.conn_type = _CauseConn if spec.cause_header else _Conn
        self.method = spec.method
        self.requests = [
            build_request(spec.method, u, dict(spec.headers), spec.body) for u in spec.urls
        ]
        origins: dict[tuple[str, int, bool], _Origin] = {}
        self.origins = []
        for url in spec.urls:
            origin = _Origin(url)
            key = (origin.host, origin.port, origin.tls)
            self.origins.append(origins.setdefault(key, origin))
        self.all_origins = list(origins.values())
        self.busy: set[_Conn] = set()
        self.open = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.ssl = tls_context(spec) if any(o.tls for o in self.all_origins) else None
        self.sweeper = self.loop.create_task(self._sweep())

    def launch(self, index: int, context: Any) -> None:
        """Send request ``index`` (of the spec's URLs) now; the caller caps concurrency."""
        origin = self.origins[index]
        if origin.idle:
            conn = origin.idle.pop()
            self.busy.add(conn)
            conn.send(context, self.requests[index])
            return
        self._make_room()
        self.open += 1
        task = self.loop.create_task(self._connect_and_send(origin, index, context))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _make_room(self) -> None:
        """Close an idle connection to another origin if the limit is reached."""
        if self.open < self.limit:
            return
        for origin in self.all_origins:
            if origin.idle:
                origin.idle.popleft().close()
                return

    async def _connect_and_send(self, origin: _Origin, index: int, context: Any) -> None:
        started = time.monotonic()
        conn = self.conn_type(self, origin)
        try:
            async with asyncio.timeout(self.timeout):
                await self.loop.create_connection(
                    lambda: conn,
                    origin.host,
                    origin.port,
                    ssl=self.ssl if origin.tls else None,
                    server_hostname=origin.host if origin.tls else None,
                )
        except Exception as exc:  # noqa: BLE001 - every failure is classified and counted
            self.open -= 1
            self.done(context, started, time.monotonic(), None, classify(exc))
            return
        self.busy.add(conn)
        conn.send(context, self.requests[index])

    def finished(self, conn: _Conn, context: Any, status: int, keep: bool) -> None:
        self.busy.discard(conn)
        if keep and conn.transport is not None:
            conn.origin.idle.append(conn)
        else:
            conn.close()
        self.done(context, conn.sent_at, conn.received_at, status, conn.cause)

    def lost(self, conn: _Conn) -> None:
        self.open -= 1
        self.busy.discard(conn)
        with contextlib.suppress(ValueError):
            conn.origin.idle.remove(conn)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            for conn in [c for c in self.busy if c.deadline < now]:
                conn.timed_out = True
                conn.close()

    def abort(self) -> None:
        """Drop every request in flight (they are not counted) and every connection."""
        for task in list(self.tasks):
            task.cancel()
        for conn in list(self.busy):
            conn.context = None
            conn.close()
        for origin in self.all_origins:
            while origin.idle:
                origin.idle.pop().close()

    async def close(self) -> None:
        self.sweeper.cancel()
        self.abort()
        await asyncio.sleep(0)
