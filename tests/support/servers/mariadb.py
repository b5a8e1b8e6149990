"""A throwaway MariaDB server (MySQL protocol, like Aurora MySQL): own data dir and port.

::

    with mariadb.start(max_connections=40, password="...") as db:
        pymysql.connect(host=db.host, port=db.port, user=db.user, password=db.password, ...)

``mariadb-install-db`` fills a fresh temporary directory, ``mariadbd`` runs
with ``--no-defaults`` (nothing from /etc/mysql), ``--user=root`` when we are
root, listens on ``host`` (127.0.0.1 by default, or an address inside
the namespace) and on a Unix socket in that directory. ``root`` logs in over the
socket with the ``unix_socket`` plugin (:meth:`MariaDBServer.admin_connect`).
A user ``user@'%'`` with ``password`` gets every privilege on ``database``
(no SUPER, no CONNECTION ADMIN). ``stop()`` is idempotent and removes the
data directory.

Connection slots: ``max_connections`` connections in all, plus one extra for
a SUPER/CONNECTION ADMIN user once they are used up; a normal user is then
answered "Too many connections" (error 1040).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext._products.sandbox.servers._db_common import (
    free_port,
    spawn,
    terminate,
    wait_until_ready,
)
from chaos_ext._products.sandbox.servers._stoppable import Stoppable

__all__ = ["MariaDBServer", "start"]


@dataclass
class MariaDBServer(Stoppable):
    """A running server. ``host``/``port`` for TCP clients; ``stop()`` is idempotent."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    max_connections: int
    base_dir: Path
    netns: tuple[str, ...]
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def socket_path(self) -> Path:
        return self.base_dir / "mysqld.sock"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "server.log"

    def admin_connect(self) -> Any:
        """A root connection over the Unix socket (a pymysql Connection, autocommit)."""
        return pymysql.connect(
            unix_socket=str(self.socket_path),
            user="root",
            connect_timeout=5,
            read_timeout=30,
            write_timeout=30,
            autocommit=True,
        )

    def stop(self) -> None:
        """SIGTERM (clean shutdown), SIGKILL if it lingers, then remove the data directory."""
        terminate(self.process, signal.SIGTERM)
        shutil.rmtree(self.base_dir, ignore_errors=True)


def _user_flag() -> list[str]:
    return ["--user=root"] if os.geteuid() == 0 else []


def _install(data: Path) -> None:
    argv = [
        "mariadb-install-db",
        "--no-defaults",
        f"--datadir={data}",
        *_user_flag(),
        "--auth-root-authentication-method=socket",
        "--skip-test-db",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise SandboxError(f"mariadb-install-db failed ({done.returncode}): {tail}")


def _server_argv(
    base: Path, data: Path, listen: str, port: int, max_connections: int, extra: list[str]
) -> list[str]:
    return [
        "mariadbd",
        "--no-defaults",
        f"--datadir={data}",
        *_user_flag(),
        f"--socket={base / 'mysqld.sock'}",
        f"--pid-file={base / 'mysqld.pid'}",
        f"--port={port}",
        f"--bind-address={listen}",
        f"--max-connections={max_connections}",
        "--skip-name-resolve",
        "--skip-log-bin",
        "--max-connect-errors=1000000",
        "--innodb-buffer-pool-size=16M",
        "--innodb-log-file-size=16M",
        "--performance-schema=OFF",
        "--skip-innodb-doublewrite",
        *extra,
    ]


def _ready(server: MariaDBServer) -> bool:
    try:
        conn = server.admin_connect()
    except pymysql.Error:
        return False
    conn.close()
    return True


def _create_user(server: MariaDBServer) -> None:
    conn = server.admin_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{server.database}`")
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (server.user, server.password))
            cur.execute(f"GRANT ALL PRIVILEGES ON `{server.database}`.* TO %s@'%%'", (server.user,))
    finally:
        conn.close()


def start(
    *,
    password: str,
    user: str = "gameday",
    database: str = "gameday",
    max_connections: int = 40,
    host: str = "127.0.0.1",
    port: int = 0,
    netns: Sequence[str] = (),
    extra_args: list[str] | None = None,
    ready_timeout: float = 90.0,
) -> MariaDBServer:
    """Install a data dir, start mariadbd, wait until it answers, create ``user``/``database``.

    ``netns`` is a command prefix (``["ip", "netns", "exec", ns]``) that runs
    the server inside an existing network namespace; ``host`` is then an
    address of that namespace. ``port=0`` picks a free port on this host.
    ``extra_args`` are more ``mariadbd`` options.
    Raises SandboxError (after cleaning up) if anything fails.
    """
    for label, value in (("user", user), ("database", database)):
        if not value.replace("_", "").isalnum():
            raise SandboxError(f"{label}: {value!r} must be letters, digits and '_'")
    base = Path(tempfile.mkdtemp(prefix="gd-maria-"))
    port = port or free_port()
    log = base / "server.log"
    data = base / "data"
    try:
        _install(data)
        argv = _server_argv(base, data, host, port, max_connections, extra_args or [])
        proc = spawn([*netns, *argv], log)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    server = MariaDBServer(
        host=host,
        port=port,
        user=user,
        password=password,
        database=database,
        max_connections=max_connections,
        base_dir=base,
        netns=tuple(netns),
        process=proc,
    )
    try:
        wait_until_ready(
            proc, lambda: _ready(server), timeout=ready_timeout, what="mariadbd", log=log
        )
        _create_user(server)
    except BaseException:
        server.stop()
        raise
    return server
