"""A tiny real web app in front of a real database, with Prometheus metrics and a readiness check.

Two connection strategies, the two kinds of service the db-exhaustion
experiment tells apart:

* ``pooled``: ``pool_size`` connections opened at start, borrowed per request,
  plus one kept for the readiness check;
* ``per-request``: a new connection for every request and readiness check.

``GET /work`` runs a 500 ms query (500 on any database error), ``GET /readyz``
a ``SELECT 1``, ``GET /metrics`` exposes ``http_requests_total{code}``.
:class:`Traffic` drives ``/work`` from threads, bounded in time and count.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest

from chaos_ext.db._engines import ConnectFailure, ConnectParams, close, connect

_SLEEP = {"postgresql": "SELECT pg_sleep(0.5)", "mysql": "SELECT SLEEP(0.5)"}


def _run(conn: Any, engine: str, sql: str) -> None:
    if engine == "postgresql":
        conn.execute(sql)
        return
    with conn.cursor() as cur:
        cur.execute(sql)


class App:
    """The app's state: connection strategy, pool, request counter."""

    def __init__(self, params: ConnectParams, strategy: str, pool_size: int = 10) -> None:
        self.params = params
        self.strategy = strategy
        self.pool: queue.Queue[Any] = queue.Queue()
        self.health: queue.Queue[Any] = queue.Queue()
        if strategy == "pooled":
            for _ in range(pool_size):
                self.pool.put(connect(params))
            self.health.put(connect(params))
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "http_requests", "Requests by status", ["code"], registry=self.registry
        )

    @contextlib.contextmanager
    def connection(self, health: bool = False) -> Iterator[Any]:
        if self.strategy == "pooled":
            pool = self.health if health else self.pool
            conn = pool.get(timeout=5)
            try:
                yield conn
            finally:
                pool.put(conn)
            return
        conn = connect(self.params)
        try:
            yield conn
        finally:
            close(conn)

    def query(self, sql: str, health: bool = False) -> int:
        try:
            with self.connection(health) as conn:
                _run(conn, self.params.engine, sql)
        except (ConnectFailure, queue.Empty, OSError):
            return 500
        except Exception:  # noqa: BLE001 - any driver error is a failed request
            return 500
        return 200

    def close(self) -> None:
        for pool in (self.pool, self.health):
            while not pool.empty():
                close(pool.get_nowait())


def _handler(app: App) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, generate_latest(app.registry))
                return
            work = self.path == "/work"
            status = app.query(_SLEEP[app.params.engine] if work else "SELECT 1", not work)
            if work:
                app.requests.labels(code=str(status)).inc()
            self._send(status, b"ok\n" if status == 200 else b"database error\n")

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextlib.contextmanager
def serve(params: ConnectParams, strategy: str) -> Iterator[str]:
    """Run the app on a free port of 127.0.0.1; yields its base URL."""
    app = App(params, strategy)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(app))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        app.close()


class Traffic:
    """``workers`` threads calling ``/work``, ``active`` at a time, bounded in time and count.

    Raise ``active`` for a traffic surge (a load test ramping up, pods scaling out).
    """

    def __init__(
        self, url: str, workers: int, active: int, seconds: float = 120, limit: int = 100_000
    ) -> None:
        self.url = url
        self.active = active
        self.stop = threading.Event()
        self.deadline = time.monotonic() + seconds
        self.left = limit
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(workers)
        ]

    def _take(self) -> bool:
        with self.lock:
            self.left -= 1
            return self.left >= 0 and not self.stop.is_set() and time.monotonic() < self.deadline

    def _loop(self, index: int) -> None:
        while self._take():
            if index >= self.active:
                self.stop.wait(0.05)
                continue
            try:
                with urllib.request.urlopen(f"{self.url}/work", timeout=5) as response:  # noqa: S310 - http://127.0.0.1 only
                    response.read()
            except (urllib.error.URLError, OSError):
                self.stop.wait(0.25)  # a client backs off a little after an error

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=10)
