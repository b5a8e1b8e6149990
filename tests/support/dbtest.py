"""Database test support: a server seen from the test (counts, logins, refusals).

Shared by tests/db/conftest.py (fixtures) and the tests.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
import pymysql

MAX_CONNECTIONS = 40
PASSWORD = f"Gd-sekret-{uuid.uuid4().hex}"


@dataclass
class Db:
    """A running server seen from the test: an admin connection that counts, and a user login."""

    engine: str
    server: Any
    admin: Any

    @property
    def secrets(self) -> dict[str, str]:
        return {"user": self.server.user, "password": self.server.password}

    def args(self, **extra: Any) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "host": self.server.host,
            "port": self.server.port,
            "database": self.server.database,
            **extra,
        }

    def client_count(self) -> int:
        """Client connections (pg_stat_activity / Threads_connected), admin included."""
        if self.engine == "postgresql":
            row = self.admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            ).fetchone()
            return int(row[0])
        with self.admin.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
            return int(cur.fetchone()[1])

    def user_sessions(self) -> list[tuple[str, float]]:
        """(last query, idle seconds) of every session of the test user (processlist)."""
        if self.engine == "postgresql":
            rows = self.admin.execute(
                "SELECT coalesce(query, ''), extract(epoch FROM now() - state_change)::float"
                " FROM pg_stat_activity WHERE usename = %s AND backend_type = 'client backend'",
                (self.server.user,),
            ).fetchall()
            return [(str(q), float(s)) for q, s in rows]
        with self.admin.cursor() as cur:
            cur.execute("SHOW PROCESSLIST")
            rows = cur.fetchall()
        return [(str(r[7] or ""), float(r[5])) for r in rows if r[1] == self.server.user]

    def client_id(self, conn: Any) -> int:
        """The server's id of a client connection (backend pid / thread id)."""
        return int(conn.info.backend_pid if self.engine == "postgresql" else conn.thread_id())

    def ids_gone(self, ids: list[int]) -> bool:
        """Whether the server has ended these sessions (see :meth:`client_id`).

        A client's close returns before the server's session ends: until then its
        slot still counts as taken.
        """
        if self.engine == "postgresql":
            row = self.admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (ids,)
            ).fetchone()
            return int(row[0]) == 0
        with self.admin.cursor() as cur:
            cur.execute("SHOW PROCESSLIST")
            return not [r for r in cur.fetchall() if int(r[0]) in ids]

    def free_for_user(self) -> int:
        """Slots a normal user can still take, computed by the test from the server's settings."""
        reserved = getattr(self.server, "superuser_reserved_connections", 0)
        return MAX_CONNECTIONS - reserved - self.client_count()

    def user_connect(self) -> Any:
        """A normal-user connection over TCP; raises the driver's error."""
        s = self.server
        if self.engine == "postgresql":
            return psycopg.connect(
                host=s.host,
                port=s.port,
                user=s.user,
                password=s.password,
                dbname=s.database,
                connect_timeout=5,
            )
        return pymysql.connect(
            host=s.host,
            port=s.port,
            user=s.user,
            password=s.password,
            database=s.database,
            connect_timeout=5,
            ssl_disabled=True,
        )

    def refusal_text(self) -> str:
        """Open one more user connection, expecting the server to refuse it; its message."""
        try:
            conn = self.user_connect()
        except (psycopg.OperationalError, pymysql.err.OperationalError) as exc:
            return server_text(exc)
        conn.close()
        raise AssertionError("the server accepted a connection it should have refused")


def server_text(exc: Exception) -> str:
    """What the server said, without the driver's framing."""
    if isinstance(exc, psycopg.Error):
        return " ".join(str(exc).rsplit("FATAL:", 1)[-1].split())
    return f"({exc.args[0]}) {exc.args[1]}"
