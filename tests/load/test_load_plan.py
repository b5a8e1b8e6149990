"""plan_drive_http_load against a real HTTP server: the schedule, and not one request sent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from support.k8s_emulator import EmulatorHandle

from chaos_ext.load.plan import plan_drive_http_load


class _Counting(BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    seen: ClassVar[list[str]] = []
    handler = type("Handler", (_Counting,), {"seen": seen})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/checkout?token=abc", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_plan_gives_rate_duration_and_targets_and_sends_nothing(
    server: tuple[str, list[str]], ledger_path: Path
) -> None:
    url, seen = server
    plan = plan_drive_http_load(urls=[url], ramp={"from": 10, "to": 50, "over_seconds": 20})
    radius = plan["blast_radius"]
    assert plan["targets"] == [url.split("?")[0]]  # the query string (a token) is not shown
    assert radius["peak_rate"] == 50 and radius["duration_seconds"] == 20
    assert radius["expected_requests"] == 600  # (10 + 50) / 2 x 20
    assert radius["mode"] == "local"
    assert all(c["ok"] for c in plan["preflight"]), plan["preflight"]
    assert seen == []  # a TCP connect, no request
    assert not ledger_path.exists()


def test_job_mode_plans_the_pods(ledger_path: Path, emulator: EmulatorHandle) -> None:
    plan = plan_drive_http_load(
        urls="http://web.shop.svc:8080/",
        rate=40,
        duration_seconds=30,
        replicas=4,
        kubernetes={"namespace": "gameday", "pushgateway": "http://pgw.monitoring:9091"},
    )
    radius = plan["blast_radius"]
    assert radius["mode"] == "kubernetes" and radius["replicas"] == 4
    assert len(radius["pods"]) == 4 and radius["rate_per_pod"] == 10
    assert radius["namespace"] == "gameday"
    assert all(c["ok"] for c in plan["preflight"]), plan["preflight"]  # RBAC asked, allowed
