"""HTTP clients of the load workers, and the classification of their errors.

Both clients have the same shape: ``launch(url_index, context)`` sends one
request now and, when it ends, calls ``done(context, sent_at, ended_at,
status, kind)`` with the status (a response, and ``kind`` the value of the load's
cause header if any) or an error kind. The worker caps concurrency.

* HTTP/1.1: :class:`chaos_ext.load._http1.Http1Client` (asyncio protocols and
  httptools; see there why not aiohttp).
* HTTP/2: httpx with h2, the project's HTTP client. ``http2=True`` means
  HTTP/2 only, by ALPN on https and with prior knowledge (h2c) on plain http,
  so an endpoint that cannot speak it fails loudly instead of silently
  falling back. Redirects are never followed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

import httpx

from chaos_ext.load._classify import classify
from chaos_ext.load._http1 import Done, Http1Client, tls_context
from chaos_ext.load.spec import LoadSpec

__all__ = ["Client", "Http2Client", "classify", "make_client"]


class Client(Protocol):
    def launch(self, index: int, context: Any) -> None: ...

    def abort(self) -> None: ...

    async def close(self) -> None: ...


class Http2Client:
    """HTTP/2-only client (ALPN or prior knowledge) multiplexing up to ``limit`` streams."""

    def __init__(self, spec: LoadSpec, limit: int, done: Done) -> None:
        self.loop = asyncio.get_running_loop()
        self.spec, self.done = spec, done
        self.body = spec.body.encode() if spec.body else None
        self.tasks: set[asyncio.Task[None]] = set()
        self.client = httpx.AsyncClient(
            http1=False,
            http2=True,
            timeout=httpx.Timeout(spec.timeout),
            limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
            headers=dict(spec.headers),
            follow_redirects=False,
            verify=tls_context(spec),
        )

    def launch(self, index: int, context: Any) -> None:
        task = self.loop.create_task(self._one(self.spec.urls[index], context))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _one(self, url: str, context: Any) -> None:
        sent_at = time.monotonic()
        try:
            response = await self.client.request(self.spec.method, url, content=self.body)
        except Exception as exc:  # noqa: BLE001 - every failure is classified and counted
            self.done(context, sent_at, time.monotonic(), None, classify(exc))
        else:
            cause = response.headers.get(self.spec.cause_header) if self.spec.cause_header else None
            self.done(context, sent_at, time.monotonic(), response.status_code, cause)

    def abort(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    async def close(self) -> None:
        self.abort()
        await self.client.aclose()


def make_client(spec: LoadSpec, limit: int, done: Done) -> Client:
    """The client for the spec's protocol with at most ``limit`` concurrent requests."""
    return Http2Client(spec, limit, done) if spec.http2 else Http1Client(spec, limit, done)
