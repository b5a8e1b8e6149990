"""The sandbox's demo web service, fragile the way the incidents were.

Every request to ``/`` resolves the database's hostname through the sandbox
DNS server (over TCP by default, as NodeLocal DNSCache with ``force_tcp``
does), connects to PostgreSQL and runs a query. The fragile default opens a new
connection per request (like the PHP app in the incident) and caches nothing;
the tuned variant (``--tuned``) caches DNS answers (and serves the last good
one when a lookup fails, as NodeLocal DNSCache's serve_stale does: an expired
answer at once while one background lookup refreshes it), pools
connections and retries a failed lookup once.

``/search`` does the same work but finds the database the way a pod does:
``getaddrinfo`` (glibc) on its short name with the pod's resolv.conf
(``--resolv-conf``: the search list and ``ndots:5``, so every lookup asks
each search domain first, A and AAAA: the amplification that ran into the
VPC resolver's packet limit). The file is bind-mounted over
``/etc/resolv.conf`` in the app's own mount namespace (nothing else sees
it). It points at the sandbox's dnsmasq for the fragile app and at a
node-local caching dnsmasq (as NodeLocal DNSCache) for the tuned one.
Failed lookups count in ``app_getaddrinfo_errors_total{error}``.

Endpoints: ``/`` (the work), ``/search`` (see above), ``/healthz`` (process alive), ``/readiness``
(``SELECT 1`` within 1 s), ``/metrics`` (Prometheus: request latency
histogram, requests by code, errors by cause: dns, db-connect, db-query),
also served on ``--metrics-port`` by its own thread (what Prometheus scrapes).
A failed request answers 503 with the failed stage in ``X-Error-Cause``.

Run: ``python -m chaos_ext._products.sandbox._app --listen 0.0.0.0:8080 ...``.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
import psycopg
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    start_http_server,
)
from psycopg_pool import ConnectionPool, PoolTimeout

__all__ = ["AppConfig", "main"]

CAUSE_HEADER = "X-Error-Cause"
"""The header of a 503 that names the failed stage: dns, db-connect or db-query."""
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)


@dataclass(frozen=True)
class AppConfig:
    """How the app reaches its dependencies and how robust it is."""

    db_host: str
    db_port: int
    db_name: str
    db_user: str
    db_password: str
    dns_server: str
    dns_port: int = 53
    dns_protocol: str = "tcp"
    dns_timeout: float = 2.0
    dns_cache_seconds: float = 0.0
    dns_retries: int = 0
    dns_serve_stale: bool = False
    pool_size: int = 0
    db_timeout: float = 2.0
    query: str = "SELECT count(*) FROM pg_stat_activity"
    workers: int = 32
    search_name: str = ""  # the short name /search resolves with getaddrinfo ("" = no /search)


class StageError(Exception):
    """A request failed at one stage: dns, db-connect or db-query."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "http_requests",
            "HTTP requests by handler and status code",
            ["handler", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "http_request_duration_seconds",
            "HTTP request latency",
            ["handler"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "app_errors", "Failed requests by cause", ["cause"], registry=self.registry
        )
        self.dns = Histogram(
            "app_dns_lookup_duration_seconds",
            "DNS lookup latency",
            buckets=BUCKETS,
            registry=self.registry,
        )
        for cause in ("dns", "db-connect", "db-query"):
            self.errors.labels(cause)
        self.gai_errors = Counter(
            "app_getaddrinfo_errors",
            "Failed getaddrinfo lookups of /search by error",
            ["error"],
            registry=self.registry,
        )


class Backend:
    """DNS lookup, database connection and query, with the configured robustness."""

    def __init__(self, config: AppConfig) -> None:
        self.config = config
        self._cache: tuple[float, str] | None = None
        self._lock = threading.Lock()
        self._refreshing = False
        self.pool: ConnectionPool[Any] | None = None  # tuned: made at the first lookup

    def _conn_kwargs(self, host: str) -> dict[str, Any]:
        c = self.config
        return {
            "host": host,
            "port": c.db_port,
            "dbname": c.db_name,
            "user": c.db_user,
            "password": c.db_password,
            "connect_timeout": max(1, int(c.db_timeout)),
            "options": f"-c statement_timeout={int(c.db_timeout * 1000)}",
        }

    def resolve(self, metrics: Metrics) -> str:
        c = self.config
        with self._lock:
            if self._cache and self._cache[0] > time.monotonic():
                return self._cache[1]
            if self._cache and c.dns_serve_stale:
                # like NodeLocal DNSCache's serve_stale: answer from the expired entry at
                # once, and refresh it in the background (one refresh at a time)
                if not self._refreshing:
                    self._refreshing = True
                    threading.Thread(target=self._refresh, args=(metrics,), daemon=True).start()
                return self._cache[1]
        return self._resolve_now(metrics)

    def _refresh(self, metrics: Metrics) -> None:
        try:
            self._resolve_now(metrics)
        except StageError:
            pass  # the stale answer stays; the next request past its 5 s tries again
        finally:
            with self._lock:
                self._refreshing = False

    def _resolve_now(self, metrics: Metrics) -> str:
        c = self.config
        started = time.monotonic()
        for attempt in range(c.dns_retries + 1):
            try:
                address = self._lookup()
                break
            except (dns.exception.DNSException, OSError, StageError) as exc:
                if attempt < c.dns_retries:
                    continue
                with self._lock:
                    stale = self._cache[1] if self._cache and c.dns_serve_stale else None
                    if stale is not None:  # serve it for 5 s before trying again
                        self._cache = (time.monotonic() + 5.0, stale)
                if stale is not None:
                    return stale  # like NodeLocal DNSCache's serve_stale
                raise StageError("dns", f"lookup of {c.db_host} failed: {exc}") from exc
        metrics.dns.observe(time.monotonic() - started)
        if c.dns_cache_seconds:
            with self._lock:
                self._cache = (time.monotonic() + c.dns_cache_seconds, address)
        return address

    def _lookup(self) -> str:
        c = self.config
        query = dns.message.make_query(c.db_host, dns.rdatatype.A)
        send = dns.query.tcp if c.dns_protocol == "tcp" else dns.query.udp
        answer = send(query, c.dns_server, timeout=c.dns_timeout, port=c.dns_port)
        for rrset in answer.answer:
            for record in rrset:
                return str(record.address)
        raise StageError("dns", f"no A record for {c.db_host}")

    @contextmanager
    def connection(self, address: str) -> Iterator[psycopg.Connection[Any]]:
        if self.config.pool_size:
            with self._lock:
                if self.pool is None:
                    self.pool = ConnectionPool(
                        conninfo="",
                        kwargs={**self._conn_kwargs(address), "autocommit": True},
                        min_size=min(2, self.config.pool_size),
                        max_size=self.config.pool_size,
                        timeout=self.config.db_timeout,
                    )
            try:
                with self.pool.connection() as conn:
                    yield conn
            except PoolTimeout as exc:
                raise StageError("db-connect", f"no pooled connection: {exc}") from exc
            return
        try:
            conn = psycopg.connect(**self._conn_kwargs(address), autocommit=True)
        except psycopg.Error as exc:
            raise StageError("db-connect", str(exc).strip().splitlines()[0]) from exc
        with conn:
            yield conn

    def getaddrinfo(self, metrics: Metrics) -> str:
        """The database's address through glibc, the search list and ndots (no app cache)."""
        started = time.monotonic()
        try:
            infos = socket.getaddrinfo(
                self.config.search_name, self.config.db_port, type=socket.SOCK_STREAM
            )
        except socket.gaierror as exc:
            name = _GAI_NAMES.get(exc.errno, f"EAI_{exc.errno}")
            metrics.gai_errors.labels(name).inc()
            raise StageError("dns", f"getaddrinfo({self.config.search_name}): {exc}") from exc
        metrics.dns.observe(time.monotonic() - started)
        return str(next(i[4][0] for i in infos if i[0] == socket.AF_INET))

    def work(self, metrics: Metrics, *, search: bool = False) -> str:
        address = self.getaddrinfo(metrics) if search else self.resolve(metrics)
        with self.connection(address) as conn:
            try:
                row = conn.execute(self.config.query).fetchone()
            except psycopg.OperationalError as exc:
                raise StageError("db-connect", str(exc).strip().splitlines()[0]) from exc
            except psycopg.Error as exc:
                raise StageError("db-query", str(exc).strip().splitlines()[0]) from exc
        return f"ok {row[0] if row else ''}\n"

    def ready(self) -> bool:
        try:
            address = self.resolve(Metrics())
            with self.connection(address) as conn:
                conn.execute("SELECT 1")
        except (StageError, psycopg.Error):
            return False
        return True


def _handler(backend: Backend, metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection. Idle keep-alive connections
        # would each pin a worker thread and starve everything else.
        protocol_version = "HTTP/1.0"
        timeout = 10

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, code: int, body: bytes, ctype: str = "text/plain", cause: str = "") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            if cause:  # why it failed, for a load's cause_header (chaos_ext.load)
                self.send_header(CAUSE_HEADER, cause)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                self._send(200, b"ok\n")
            elif path == "/readiness":
                ok = backend.ready()
                self._send(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
            elif path == "/":
                self._work("/")
            elif path == "/search" and backend.config.search_name:
                self._work("/search")
            else:
                self._send(404, b"not found\n")

        def _work(self, handler: str) -> None:
            started = time.monotonic()
            cause = ""
            try:
                body, code = backend.work(metrics, search=handler == "/search").encode(), 200
            except StageError as exc:
                metrics.errors.labels(exc.cause).inc()
                body, code, cause = f"{exc.cause}: {exc}\n".encode(), 503, exc.cause
            metrics.latency.labels(handler).observe(time.monotonic() - started)
            metrics.requests.labels(handler, str(code)).inc()
            self._send(code, body, cause=cause)

    return Handler


class PooledHTTPServer(HTTPServer):
    """An HTTP server with a bounded worker pool (requests queue beyond it)."""

    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: Any, workers: int) -> None:
        super().__init__(address, handler)
        self.executor = ThreadPoolExecutor(max_workers=workers)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.executor.submit(self._serve_one, request, client_address)

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


_GAI_NAMES = {
    getattr(socket, n): n
    for n in dir(socket)
    if n.startswith("EAI_") and isinstance(getattr(socket, n), int)
}
_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18


def use_resolv_conf(path: Path) -> None:
    """Bind-mount ``path`` over /etc/resolv.conf in a mount namespace of this process only."""
    libc = ctypes.CDLL(None, use_errno=True)
    steps: tuple[tuple[str, Callable[[], int]], ...] = (
        ("unshare", lambda: libc.unshare(_CLONE_NEWNS)),
        ("make / private", lambda: libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None)),
        (
            "bind resolv.conf",
            lambda: libc.mount(str(path).encode(), b"/etc/resolv.conf", None, _MS_BIND, None),
        ),
    )
    for what, step in steps:
        if step() != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def _parse(argv: list[str] | None) -> tuple[str, int, int, AppConfig]:
    p = argparse.ArgumentParser(prog="sandbox-app", description=__doc__)
    p.add_argument("--listen", default="0.0.0.0:8080")
    p.add_argument("--metrics-port", type=int, default=8081)
    p.add_argument("--db-host", required=True)
    p.add_argument("--db-port", type=int, default=5432)
    p.add_argument("--db-name", default="app")
    p.add_argument("--db-user", default="app")
    p.add_argument("--db-password-file", required=True, type=Path)
    p.add_argument("--dns-server", required=True)
    p.add_argument("--dns-port", type=int, default=53)
    p.add_argument("--dns-protocol", choices=("tcp", "udp"), default="tcp")
    p.add_argument(
        "--resolv-conf",
        type=Path,
        help="the pod's resolv.conf for /search (getaddrinfo of --search-name)",
    )
    p.add_argument("--search-name", default="db", help="the short name /search looks up")
    p.add_argument(
        "--tuned",
        action="store_true",
        help="DNS cache 30 s serving stale answers on failure, 1 retry, a pool of 2-5 connections",
    )
    a = p.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    config = AppConfig(
        db_host=a.db_host,
        db_port=a.db_port,
        db_name=a.db_name,
        db_user=a.db_user,
        db_password=a.db_password_file.read_text().strip(),
        dns_server=a.dns_server,
        dns_port=a.dns_port,
        dns_protocol=a.dns_protocol,
        dns_cache_seconds=30.0 if a.tuned else 0.0,
        dns_retries=1 if a.tuned else 0,
        dns_serve_stale=a.tuned,
        pool_size=5 if a.tuned else 0,
        search_name=a.search_name if a.resolv_conf else "",
    )
    if a.resolv_conf:
        use_resolv_conf(a.resolv_conf)
    return host, int(port), a.metrics_port, config


def main(argv: list[str] | None = None) -> None:
    host, port, metrics_port, config = _parse(argv)
    backend = Backend(config)
    metrics = Metrics()
    # /metrics also on its own port and thread, like a real service's admin port:
    # when every worker is stuck (DNS timeouts), Prometheus still sees the failures
    start_http_server(metrics_port, addr=host, registry=metrics.registry)
    server = PooledHTTPServer((host, port), _handler(backend, metrics), config.workers)
    server.serve_forever()


if __name__ == "__main__":
    main()
