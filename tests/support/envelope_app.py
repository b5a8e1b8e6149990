"""A real HTTP service whose latency grows with a real fault: dnsmasq's held TCP slots.

``DnsBackedApp`` answers ``GET /work`` after resolving a name over **TCP** at
a real dnsmasq, on every request, like the fragile app of the incident
(kube-dns + NodeLocal DNSCache with ``force_tcp``, no cache); with
``cache_seconds`` it is the tuned app, which reuses an answer. dnsmasq serves
TCP with at most 20 child processes, so while ``saturate_dnsmasq_tcp`` holds
N idle connections the app answers in milliseconds for N <= 19 and waits for
its DNS timeout for N >= 20: the true breaking point is 20 held connections,
dnsmasq's own limit (see /work/shared/notes/machine-facts.md).

Functions an experiment calls (tests put ``tests/`` on PYTHONPATH):

* :func:`median_request_ms`, the hypothesis probe: the median wall time of
  ``count`` sequential requests, in ms (a failed request counts its time);
* :func:`noisy_neighbour`, a method action: on every ``every``-th call (a
  counter kept in a file) another client holds one more idle TCP connection
  to dnsmasq, through the real ``saturate_dnsmasq_tcp`` (ledgered, rolled
  back like any fault). At 19 held connections those runs break and the others
  hold: a noisy boundary whose pattern the test knows.
"""

from __future__ import annotations

import statistics
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query

from chaos_ext._products.sandbox.servers.dnsmasq import Dnsmasq
from chaos_ext.dns.actions import saturate_dnsmasq_tcp

NAME = "www.example.test"
DNS_TIMEOUT = 1.0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _resolve(self) -> tuple[int, bytes]:
        app = self.server
        cached = app.cache
        if cached and time.monotonic() - cached[0] < app.cache_seconds:
            return 200, cached[1]
        query = dns.message.make_query(NAME, "A")
        try:
            answer = dns.query.tcp(query, app.dns_host, port=app.dns_port, timeout=DNS_TIMEOUT)
        except (OSError, dns.exception.DNSException) as exc:
            return 504, f"dns: {type(exc).__name__}".encode()
        body = str(answer.answer[0][0]).encode() if answer.answer else b"-"
        if app.cache_seconds:
            app.cache = (time.monotonic(), body)
        return 200, body

    def do_GET(self) -> None:
        code, body = self._resolve()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    dns_host: str
    dns_port: int
    cache_seconds: float
    cache: tuple[float, bytes] | None = None


class DnsBackedApp:
    """The service on 127.0.0.1 and an OS-assigned port, in a thread; a context manager.

    ``cache_seconds`` > 0 is the tuned variant: an answer is reused that long,
    so held TCP slots do not reach it while the cache is warm.
    """

    def __init__(self, dns_host: str, dns_port: int, cache_seconds: float = 0) -> None:
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.dns_host, self.server.dns_port = dns_host, dns_port
        self.server.cache_seconds = cache_seconds
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/work"

    def __enter__(self) -> DnsBackedApp:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def _one_request_ms(url: str, timeout: float) -> float:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - http only
            response.read()
    except (urllib.error.URLError, OSError):
        pass  # a 504 or a timeout: its time is what the hypothesis judges
    return (time.perf_counter() - started) * 1000


def median_request_ms(url: str, count: int = 3, timeout: float = 5.0) -> float:
    """Median wall time of ``count`` sequential GETs of ``url``, in milliseconds."""
    return round(statistics.median(_one_request_ms(url, timeout) for _ in range(count)), 2)


def noisy_neighbour(
    server: str, port: int, state_file: str, every: int = 3, hold_seconds: float = 60
) -> dict[str, Any]:
    """Hold one more TCP connection to dnsmasq on every ``every``-th call (1st, 4th, ...)."""
    state = Path(state_file)
    calls = int(state.read_text()) if state.exists() else 0
    state.write_text(str(calls + 1))
    if calls % every:
        return {"joined": False, "call": calls + 1}
    held = saturate_dnsmasq_tcp(server=server, port=port, connections=1, hold_seconds=hold_seconds)
    return {"joined": True, "call": calls + 1, "held": held["held"]}


def dns_experiment(
    app: DnsBackedApp, dns: Dnsmasq, envelope: dict[str, Any], extra_method: tuple[Any, ...] = ()
) -> dict[str, Any]:
    """The experiment the envelope tests vary: hold N TCP connections, judge the app."""
    return {
        "version": "1.0.0",
        "title": "The app answers in under 300 ms while dnsmasq's TCP slots are held",
        "description": "Idle TCP connections held on dnsmasq, as NodeLocal DNSCache with "
        "force_tcp keeps them; the app resolves over TCP on every request.",
        "steady-state-hypothesis": {
            "title": "median request under 300 ms",
            "probes": [
                {
                    "type": "probe",
                    "name": "app-median-ms",
                    "tolerance": {"type": "range", "range": [0, 300]},
                    "provider": {
                        "type": "python",
                        "module": "support.envelope_app",
                        "func": "median_request_ms",
                        "arguments": {"url": app.url},
                    },
                }
            ],
        },
        "method": [
            {
                "type": "action",
                "name": "hold-dns-tcp",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.dns.actions",
                    "func": "saturate_dnsmasq_tcp",
                    "arguments": {
                        "server": dns.address,
                        "port": dns.port,
                        "connections": 25,
                        "hold_seconds": 60,
                    },
                },
            },
            *extra_method,
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "release-dns-tcp",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.dns.actions",
                    "func": "release_dnsmasq_tcp",
                    "arguments": {"server": dns.address, "port": dns.port},
                },
            },
        ],
        "extensions": [{"name": "gameday", "envelope": envelope}],
    }
