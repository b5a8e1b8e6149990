"""HTTP clients for the load workers, and the classification of their errors.

HTTP/1.1 uses aiohttp: the fastest maintained asyncio HTTP/1.1 client (C
parser, keep-alive pool with a hard connection limit). HTTP/2 uses httpx with
h2 (already the project's HTTP client): ``http2=True`` means HTTP/2 only, by
ALPN on https and with prior knowledge (h2c) on plain http, so an endpoint
that cannot speak it fails loudly instead of silently falling back.

Redirects are never followed: the load only reaches the URLs the experiment
names.
"""

from __future__ import annotations

import socket
from typing import Protocol

import aiohttp
import httpx

from chaos_ext.load.spec import LoadSpec

__all__ = ["Client", "classify", "make_client"]


class Client(Protocol):
    async def fetch(self, url: str) -> int:
        """Send one request, read the whole body, return the status."""

    async def close(self) -> None: ...


class AiohttpClient:
    """HTTP/1.1 keep-alive client with at most ``limit`` connections."""

    def __init__(self, spec: LoadSpec, limit: int) -> None:
        self.method = spec.method
        self.body = spec.body.encode() if spec.body else None
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=limit, ttl_dns_cache=30),
            timeout=aiohttp.ClientTimeout(total=spec.timeout),
            headers=dict(spec.headers),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
        )

    async def fetch(self, url: str) -> int:
        async with self.session.request(
            self.method, url, data=self.body, allow_redirects=False
        ) as resp:
            await resp.read()
            return resp.status

    async def close(self) -> None:
        await self.session.close()


class HttpxClient:
    """HTTP/2-only client (ALPN or prior knowledge) multiplexing up to ``limit`` streams."""

    def __init__(self, spec: LoadSpec, limit: int) -> None:
        self.method = spec.method
        self.body = spec.body.encode() if spec.body else None
        self.client = httpx.AsyncClient(
            http1=False,
            http2=True,
            timeout=httpx.Timeout(spec.timeout),
            limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
            headers=dict(spec.headers),
            follow_redirects=False,
        )

    async def fetch(self, url: str) -> int:
        response = await self.client.request(self.method, url, content=self.body)
        return response.status_code

    async def close(self) -> None:
        await self.client.aclose()


def make_client(spec: LoadSpec, limit: int) -> Client:
    """The client for the spec's protocol with at most ``limit`` concurrent requests."""
    return HttpxClient(spec, limit) if spec.http2 else AiohttpClient(spec, limit)


def _caused_by_dns(exc: BaseException) -> bool:
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, socket.gaierror):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def classify(exc: BaseException) -> str:  # noqa: PLR0911 - one answer per error family
    """Error kind of a failed request: connect, dns, timeout or other."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorDNSError | socket.gaierror):
        return "dns"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "dns" if isinstance(exc.os_error, socket.gaierror) else "connect"
    if isinstance(exc, httpx.ConnectError):
        return "dns" if _caused_by_dns(exc) else "connect"
    if isinstance(exc, aiohttp.ClientConnectionError | httpx.NetworkError | ConnectionError):
        return "connect"
    if isinstance(exc, httpx.RemoteProtocolError | OSError):
        return "connect"
    return "other"
