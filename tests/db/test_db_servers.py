"""The reusable launchers: inside a network namespace, idempotent stop, nothing left behind."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any

import pytest
from support.servers import mariadb

from chaos_ext._products.sandbox.servers import postgres

CONNECT_INSIDE = (
    "import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), 3);"
    " print('open')"
)


def _tcp_open_here(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _tcp_open_in(netns: str, port: int) -> bool:
    done = subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, "-c", CONNECT_INSIDE, str(port)],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    return done.stdout.strip() == "open"


def _count(engine: str, server: Any) -> int:
    if engine == "postgresql":
        with server.admin_connect() as conn:
            return int(conn.execute("SELECT count(*) FROM pg_stat_activity").fetchone()[0])
    conn = server.admin_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.max_connections")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("engine", ["postgresql", "mysql"])
def test_server_inside_a_network_namespace(engine: str, netns_name: str) -> None:
    subprocess.run(["ip", "netns", "add", netns_name], check=True, timeout=10)
    try:
        subprocess.run(
            ["ip", "netns", "exec", netns_name, "ip", "link", "set", "lo", "up"],
            check=True,
            timeout=10,
        )
        launcher: Any = postgres if engine == "postgresql" else mariadb
        inside = ["ip", "netns", "exec", netns_name]
        with launcher.start(password="pw-netns", netns=inside, max_connections=25) as server:
            assert _tcp_open_in(netns_name, server.port)
            assert not _tcp_open_here(server.port)  # this host's loopback is untouched
            assert _count(engine, server) >= 1  # the Unix socket reaches it from here
            base = server.base_dir
        assert not base.exists()
    finally:
        subprocess.run(["ip", "netns", "delete", netns_name], check=False, timeout=10)


@pytest.mark.parametrize("engine", ["postgresql", "mysql"])
def test_stop_is_idempotent_and_removes_everything(engine: str) -> None:
    launcher: Any = postgres if engine == "postgresql" else mariadb
    server = launcher.start(password="pw-stop")
    port, base, proc = server.port, server.base_dir, server.process
    assert _tcp_open_here(port)
    assert "pw-stop" not in repr(server)
    server.stop()
    server.stop()
    assert proc.poll() is not None
    assert not _tcp_open_here(port)
    assert not base.exists()
