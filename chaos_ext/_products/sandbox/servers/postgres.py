"""A throwaway PostgreSQL 15 server: own data dir, own port, optional network namespace.

::

    with postgres.start(max_connections=40, password="...") as pg:
        psycopg.connect(host=pg.host, port=pg.port, user=pg.user, password=pg.password, ...)

``initdb`` runs into a fresh temporary directory, the server listens on
``host`` (127.0.0.1 by default, or an address inside a namespace) and on a Unix
socket in that directory. PostgreSQL refuses to run as root, so when we are
root both ``initdb`` and the server run as the ``postgres`` system user (via
``setpriv``). Local (Unix socket) connections are trusted for the superuser
``postgres`` (:meth:`PostgresServer.admin_connect`); TCP connections need a
password (scram-sha-256). A login role ``user`` with ``password`` owning
database ``database`` is created. ``stop()`` is idempotent and removes the
data directory.

Connection slots: a normal role can hold ``max_connections -
superuser_reserved_connections`` client connections (3 reserved by default),
then the server answers "remaining connection slots are reserved for
non-replication superuser connections".
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from chaos_ext._products.sandbox.errors import SandboxError
from chaos_ext._products.sandbox.servers._db_common import (
    free_port,
    spawn,
    terminate,
    wait_until_ready,
)
from chaos_ext._products.sandbox.servers._stoppable import Stoppable

__all__ = ["BIN", "PostgresServer", "start"]

BIN = Path("/usr/lib/postgresql/15/bin")
SUPERUSER = "postgres"
_RUN_AS = "postgres"
_HBA = """\
local all all trust
host all all 0.0.0.0/0 scram-sha-256
host all all ::/0 scram-sha-256
"""


@dataclass
class PostgresServer(Stoppable):
    """A running server. ``host``/``port`` for TCP clients; ``stop()`` is idempotent."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    max_connections: int
    superuser_reserved_connections: int
    base_dir: Path
    netns: tuple[str, ...]
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def socket_dir(self) -> Path:
        return self.base_dir

    @property
    def log_path(self) -> Path:
        return self.base_dir / "server.log"

    def admin_connect(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        """A superuser connection over the Unix socket (uses a reserved slot if needed)."""
        return psycopg.connect(
            host=str(self.socket_dir),
            port=self.port,
            user=SUPERUSER,
            dbname=dbname,
            connect_timeout=5,
            autocommit=True,
        )

    def stop(self) -> None:
        """Fast shutdown (SIGINT), SIGKILL if it lingers, then remove the data directory."""
        terminate(self.process, signal.SIGINT)
        shutil.rmtree(self.base_dir, ignore_errors=True)


def _as_postgres() -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={_RUN_AS}", f"--regid={_RUN_AS}", "--init-groups"]


def _initdb(base: Path) -> Path:
    data = base / "data"
    if os.geteuid() == 0:
        owner = pwd.getpwnam(_RUN_AS)
        os.chown(base, owner.pw_uid, owner.pw_gid)
    argv = [
        *_as_postgres(),
        str(BIN / "initdb"),
        "-D",
        str(data),
        "-U",
        SUPERUSER,
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        "--no-sync",
        "-E",
        "UTF8",
        "--locale=C",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise SandboxError(f"initdb failed ({done.returncode}): {tail}")
    (data / "pg_hba.conf").write_text(_HBA)
    return data


def _server_argv(
    data: Path, base: Path, listen: str, port: int, settings: Mapping[str, str]
) -> list[str]:
    argv = [str(BIN / "postgres"), "-D", str(data)]
    merged = {
        "listen_addresses": listen,
        "port": str(port),
        "unix_socket_directories": str(base),
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "shared_buffers": "16MB",
        "autovacuum": "off",
        "max_wal_senders": "0",
        "wal_level": "minimal",
        **settings,
    }
    for key, value in merged.items():
        argv += ["-c", f"{key}={value}"]
    return argv


def _ready(server: PostgresServer) -> bool:
    try:
        with server.admin_connect() as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _create_role(server: PostgresServer) -> None:
    with server.admin_connect() as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(server.user), sql.Literal(server.password)
            )
        )
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(server.database), sql.Identifier(server.user)
            )
        )


def start(
    *,
    password: str,
    user: str = "gameday",
    database: str = "gameday",
    max_connections: int = 40,
    superuser_reserved_connections: int = 3,
    host: str = "127.0.0.1",
    port: int = 0,
    netns: Sequence[str] = (),
    settings: Mapping[str, str] | None = None,
    ready_timeout: float = 60.0,
) -> PostgresServer:
    """initdb, start, wait until it answers, create ``user``/``database``.

    ``netns`` is a command prefix (``["ip", "netns", "exec", ns]``) that runs
    the server inside an existing network namespace; ``host`` is then an
    address of that namespace. ``port=0`` picks a free port on this host.
    ``settings`` adds ``-c key=value`` options.
    Raises SandboxError (after cleaning up) if anything fails.
    """
    base = Path(tempfile.mkdtemp(prefix="gd-pg-"))
    port = port or free_port()
    log = base / "server.log"
    try:
        data = _initdb(base)
        extra = {
            "max_connections": str(max_connections),
            "superuser_reserved_connections": str(superuser_reserved_connections),
            **(settings or {}),
        }
        server_argv = _server_argv(data, base, host, port, extra)
        proc = spawn([*netns, *_as_postgres(), *server_argv], log)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    server = PostgresServer(
        host=host,
        port=port,
        user=user,
        password=password,
        database=database,
        max_connections=max_connections,
        superuser_reserved_connections=superuser_reserved_connections,
        base_dir=base,
        netns=tuple(netns),
        process=proc,
    )
    try:
        wait_until_ready(
            proc, lambda: _ready(server), timeout=ready_timeout, what="postgres", log=log
        )
        _create_role(server)
    except BaseException:
        server.stop()
        raise
    return server
