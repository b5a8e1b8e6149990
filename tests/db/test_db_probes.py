"""connection_headroom against the real servers; http_readiness against a real HTTP server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.dbtest import Db
from support.harness import wait_for

from chaos_ext.db.actions import exhaust_connections, release_connections
from chaos_ext.db.probes import connection_headroom, http_readiness
from chaos_ext.errors import InvalidArgument


def test_headroom_follows_what_is_held(db: Db) -> None:
    expected = db.free_for_user()  # the test's own count, from the admin connection
    idle = connection_headroom(**db.args(), secrets=db.secrets)
    assert idle == expected

    exhaust_connections(**db.args(target=10, hold_seconds=60), secrets=db.secrets)
    wait_for(lambda: db.client_count() == 11, 5, "only the held connections and the admin")
    assert connection_headroom(**db.args(), secrets=db.secrets) == idle - 10
    release_connections()
    wait_for(lambda: db.client_count() == 1, 10, "the connection count back at its baseline")

    exhaust_connections(**db.args(target="max", hold_seconds=60), secrets=db.secrets)
    # no slot left even for the probe: headroom 0, not an error
    assert connection_headroom(**db.args(), secrets=db.secrets) == 0
    release_connections()


# /slow answers after SLOW_S; a 0.5 s probe must give up long before that. The bound (2 s) is
# 4x the probe's timeout and 1 s short of the answer: it tells "gave up" from "waited" with 2x
# margins either way on a busy 2-core machine (the earlier 1.4 s bound was 0.1 s from the answer).
SLOW_S = 3.0


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(SLOW_S)
        status = 503 if self.path == "/unready" else 200
        body = b"ok\n" if status == 200 else b"not ready\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def app_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_readiness_true_when_answered_in_time(app_url: str) -> None:
    assert http_readiness(f"{app_url}/ready", timeout_seconds=2) is True


def test_readiness_false_on_other_status(app_url: str) -> None:
    assert http_readiness(f"{app_url}/unready", timeout_seconds=2) is False
    assert http_readiness(f"{app_url}/unready", timeout_seconds=2, expect_status=503) is True


def test_readiness_false_when_too_slow(app_url: str) -> None:
    started = time.monotonic()
    assert http_readiness(f"{app_url}/slow", timeout_seconds=0.5) is False
    assert time.monotonic() - started < 2.0  # gave up at the timeout, did not wait for it
    assert http_readiness(f"{app_url}/slow", timeout_seconds=2 * SLOW_S) is True


def test_readiness_false_when_nothing_listens(app_url: str) -> None:
    closed = app_url.rsplit(":", 1)[0] + ":1"
    assert http_readiness(f"{closed}/ready", timeout_seconds=1) is False


@pytest.mark.parametrize(
    ("url", "timeout", "status", "expected"),
    [
        ("ftp://x/ready", 1.0, 200, "url: 'ftp://x/ready' is not an http"),
        ("not a url", 1.0, 200, "url: 'not a url'"),
        ("http://x/ready", 0.0, 200, r"timeout_seconds: 0\.0 is outside"),
        ("http://x/ready", 1.0, 42, "expect_status: 42 is outside"),
    ],
)
def test_readiness_arguments(url: str, timeout: float, status: int, expected: str) -> None:
    with pytest.raises(InvalidArgument, match=expected):
        http_readiness(url, timeout_seconds=timeout, expect_status=status)
