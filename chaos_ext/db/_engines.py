"""The two wire protocols: connect, read capacity, keep alive, explain failures.

PostgreSQL goes through psycopg (libpq), MySQL/MariaDB/Aurora MySQL through
pymysql. Driver exceptions never leave this module: a failed connect becomes
a :class:`ConnectFailure` whose ``message`` is one line naming the server,
what went wrong and what to check, with the password scrubbed from anything
the driver said; ``kind`` tells a connection-limit refusal ("limit") from a
login failure ("auth"), a timeout, an unreachable server, or anything else.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from chaos_ext.db._target import Capacity
from chaos_ext.errors import ConnectFailure

__all__ = [
    "ConnectFailure",
    "ConnectParams",
    "capacity",
    "close",
    "connect",
    "ping",
    "scrub",
    "server_identity",
    "standing_capacity",
]

_PG_LIMIT = (
    "too many clients",
    "remaining connection slots are reserved",
    "too many connections",
)
_PG_AUTH = ("password authentication failed", "no password supplied", "does not exist", "pg_hba")
_MYSQL_LIMIT = {1040, 1203, 1226}  # too many connections, max_user_connections, user resource
_MYSQL_AUTH = {1044, 1045, 1049, 1698}
_HINTS = {
    "auth": "check the user/password secrets and the database name",
    "timeout": "no answer within {timeout:g} s: is the host reachable and the port right?",
    "unreachable": "nothing accepts connections there: check host and port",
    "limit": "the server has no connection slot left for this user",
    "other": "see the server's message",
}


@dataclass(frozen=True)
class ConnectParams:
    """Where and how to connect. The password is never shown (``repr=False``)."""

    engine: str
    host: str
    port: int
    database: str
    user: str
    password: str = field(repr=False)
    connect_timeout: float = 5.0
    application_name: str = "gameday"

    @property
    def where(self) -> str:
        return f"{self.engine} at {self.host}:{self.port}"

    def as_payload(self) -> dict[str, Any]:
        """For a helper's stdin (never argv or the environment)."""
        return asdict(self)


def scrub(text: str, secret: str) -> str:
    """``text`` without ``secret`` in it, on one line."""
    if secret:
        text = text.replace(secret, "***")
    return " ".join(text.split())


def connect(params: ConnectParams) -> Any:
    """Open one connection (autocommit); raise ConnectFailure."""
    if params.engine == "postgresql":
        return _connect_pg(params)
    return _connect_mysql(params)


def _failure(params: ConnectParams, kind: str, text: str) -> ConnectFailure:
    text = scrub(text, params.password)
    hint = _HINTS[kind].format(timeout=params.connect_timeout)
    message = f"cannot connect to {params.where} as {params.user!r}: {text} ({hint})"
    return ConnectFailure(message, kind=kind, server_text=text)


def _connect_pg(params: ConnectParams) -> Any:
    import psycopg  # noqa: PLC0415 - each helper imports only its engine's driver

    try:
        return psycopg.connect(
            host=params.host,
            port=params.port,
            dbname=params.database or "postgres",
            user=params.user,
            password=params.password,
            connect_timeout=max(2, math.ceil(params.connect_timeout)),
            application_name=params.application_name,
            gssencmode="disable",
            keepalives=1,
            keepalives_idle=30,
            tcp_user_timeout=30_000,
            autocommit=True,
        )
    except psycopg.Error as exc:
        raise _pg_failure(params, exc) from None


def _pg_failure(params: ConnectParams, exc: Exception) -> ConnectFailure:
    raw = str(exc)
    text = raw.rsplit("FATAL:", 1)[1] if "FATAL:" in raw else raw.rsplit("failed:", 1)[-1]
    low = text.lower()
    if any(key in low for key in _PG_LIMIT):
        kind = "limit"
    elif any(key in low for key in _PG_AUTH):
        kind = "auth"
    elif "timeout" in low:
        kind = "timeout"
    elif "refused" in low or "no route" in low or "translate host" in low:
        kind = "unreachable"
    else:
        kind = "other"
    return _failure(params, kind, text)


@functools.cache
def _mysql_connection_class() -> Any:
    """pymysql's Connection, sharing one TLS context for its "preferred" TLS mode.

    Left alone, pymysql builds a fresh default SSLContext for every connection
    (loading the system CA store: ~20 ms of CPU holding the GIL), which caps
    concurrent opening at ~40 connections/s. The shared context is the same
    one pymysql builds (system CAs, no verification in preferred mode);
    explicit TLS settings still go to pymysql's own code.
    """
    import pymysql  # noqa: PLC0415 - each helper imports only its engine's driver

    shared: dict[str, Any] = {}
    lock = threading.Lock()

    class Connection(pymysql.connections.Connection):  # type: ignore[misc]
        def _create_ssl_ctx(self, sslp: Any) -> Any:
            if sslp != {}:
                return super()._create_ssl_ctx(sslp)
            with lock:
                if "ctx" not in shared:
                    shared["ctx"] = super()._create_ssl_ctx(sslp)
                return shared["ctx"]

    return Connection


def _connect_mysql(params: ConnectParams) -> Any:
    import pymysql  # noqa: PLC0415 - each helper imports only its engine's driver

    try:
        return _mysql_connection_class()(
            host=params.host,
            port=params.port,
            user=params.user,
            password=params.password,
            database=params.database or None,
            connect_timeout=params.connect_timeout,
            # pymysql reads the server's greeting under read_timeout, not connect_timeout
            read_timeout=params.connect_timeout,
            write_timeout=params.connect_timeout,
            autocommit=True,
            program_name=params.application_name,
        )
    except pymysql.Error as exc:
        raise _mysql_failure(params, exc) from None


def _mysql_failure(params: ConnectParams, exc: Exception) -> ConnectFailure:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    if code in _MYSQL_LIMIT:
        kind = "limit"
    elif code in _MYSQL_AUTH:
        kind = "auth"
    elif "timed out" in text.lower():
        kind = "timeout"
    elif code == 2003:
        kind = "unreachable"
    else:
        kind = "other"
    return _failure(params, kind, f"({code}) {text}" if code else text)


# Client backends. Without pg_read_all_stats a role sees other roles' rows with
# backend_type NULL: a row with a database and a user is then counted as a
# client (background processes have neither; the logical replication launcher
# has no database). Exact with pg_read_all_stats / pg_monitor (RDS master user).
_PG_CLIENTS = (
    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
    " OR (backend_type IS NULL AND datid IS NOT NULL AND usesysid IS NOT NULL)"
)


def capacity(conn: Any, engine: str) -> Capacity:
    """max_connections, the slots a normal user cannot take, client connections in use."""
    if engine == "postgresql":
        row = conn.execute(
            "SELECT current_setting('max_connections')::int,"
            " CASE WHEN current_setting('is_superuser') = 'on' THEN 0 ELSE"
            "  current_setting('superuser_reserved_connections')::int"
            "  + coalesce(current_setting('reserved_connections', true), '0')::int END,"
            f" ({_PG_CLIENTS})::int"
        ).fetchone()
        return Capacity(max_connections=row[0], reserved=row[1], in_use=row[2])
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.max_connections")
        (max_connections,) = cur.fetchone()
        cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
        (_, in_use) = cur.fetchone()
    return Capacity(max_connections=int(max_connections), reserved=0, in_use=int(in_use))


def standing_capacity(conn: Any, engine: str, *, samples: int = 3, gap_s: float = 0.1) -> Capacity:
    """:func:`capacity` with ``in_use`` the fewest of ``samples`` readings ``gap_s`` apart.

    A client that connects per request (the fragile app of the incidents) holds
    a slot for milliseconds: one reading may count it, and ``max-minus-N`` would
    then leave N + 1 slots free. The standing connections are in every reading.
    """
    readings = [capacity(conn, engine)]
    for _ in range(samples - 1):
        time.sleep(gap_s)
        readings.append(capacity(conn, engine))
    return min(readings, key=lambda reading: reading.in_use)


def server_identity(conn: Any, engine: str) -> dict[str, str]:
    """What tells this database server from another at the same address.

    PostgreSQL: the cluster's ``system_identifier`` (set by initdb, readable by
    any user); MySQL: ``@@server_uuid``; MariaDB (which has none):
    ``@@hostname``, ``@@datadir`` and ``@@server_id``. With the version.
    """
    if engine == "postgresql":
        row = conn.execute(
            "SELECT system_identifier::text, current_setting('server_version')"
            " FROM pg_control_system()"
        ).fetchone()
        return {"system_identifier": str(row[0]), "version": str(row[1])}
    with conn.cursor() as cur:
        cur.execute("SELECT @@version, @@hostname, @@datadir, @@server_id")
        version, hostname, datadir, server_id = cur.fetchone()
        found = {
            "version": str(version),
            "hostname": str(hostname),
            "datadir": str(datadir),
            "server_id": str(server_id),
        }
        with contextlib.suppress(Exception):  # MariaDB has no server_uuid
            cur.execute("SELECT @@server_uuid")
            found["server_uuid"] = str(cur.fetchone()[0])
    return found


def ping(conn: Any, engine: str) -> None:
    """A keep-alive query; raises the driver's error if the connection is gone."""
    if engine == "postgresql":
        conn.execute("SELECT 1")
        return
    with conn.cursor() as cur:
        cur.execute("SELECT 1")


def close(conn: Any) -> None:
    """Close quietly (the server may already have dropped it)."""
    with contextlib.suppress(Exception):  # closing a dead connection is not an error
        conn.close()
