"""Envoy fixtures: a local admin HTTP server, silent/closed ports, a kmock API with exec."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.envoy_dumps import AdminServer
from support.kmock_exec import RunningEmulator, running_emulator


def _serve(state: AdminServer) -> tuple[ThreadingHTTPServer, threading.Thread]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path)
            status, body = state.routes.get(self.path, (404, b"invalid path\n"))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def admin_servers() -> Iterator[Callable[[], AdminServer]]:
    """Start real HTTP servers on 127.0.0.1:<free port>; routes are set by the test."""
    running: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start() -> AdminServer:
        state = AdminServer(url="")
        running.append(_serve(state))
        return state

    try:
        yield start
    finally:
        for server, thread in running:
            server.shutdown()
            server.server_close()
            thread.join(10)


@pytest.fixture
def admin_server(admin_servers: Callable[[], AdminServer]) -> AdminServer:
    """One stand-in Envoy admin port."""
    return admin_servers()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (backlog) but never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (bound then released)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def k8s_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningEmulator]:
    """kmock's Kubernetes emulator with pods/exec, reached as chaostoolkit-kubernetes does.

    KUBERNETES_HOST (the environment route of create_k8s_api_client); KUBECONFIG
    points at a missing file so no local kubeconfig takes precedence.
    """
    with running_emulator() as emulator:
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
        monkeypatch.setenv("KUBERNETES_HOST", emulator.url)
        monkeypatch.delenv("CHAOSTOOLKIT_IN_POD", raising=False)
        yield emulator
