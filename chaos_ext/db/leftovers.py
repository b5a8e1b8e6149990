"""Database sessions of a connection hold, by application name: the system side of
``gameday ledger --scan --db-dsn DSN``.

``exhaust_connections`` opens every connection of its holder with the
application name ``gameday-exhaust-<ledger id>`` (PostgreSQL's
``application_name``, MySQL's ``program_name`` connection attribute). A scan
reads PostgreSQL's ``pg_stat_activity`` on the server the DSN names (one
connection, named ``gameday-scan``) and lists those sessions, grouped by
name: an open ``db-connections`` entry with that id owns them (a session
named ``gameday-exhaust`` alone, from before the id was in the name, is
owned by any open hold on the same server). The orphan undo
(``db-session-orphan``) ends them with ``pg_terminate_backend`` on the same
server only (its ``system_identifier``), through the DSN given to the
command (``--db-dsn``, its :class:`~chaos_ext._core.settings.Settings`, else
``$GAMEDAY_SCAN_DSN``; never recorded: it may hold a password).
MySQL and MariaDB are not scanned: their connection attributes live in
``performance_schema``, which MariaDB leaves off by default. Listing changes
nothing.
"""

from __future__ import annotations

import os
import time
from typing import Any
from urllib.parse import urlsplit

from chaos_ext._core.ledger import Adoption, Entry, Leftover, machine_scope
from chaos_ext._core.settings import current_settings
from chaos_ext.db._engines import server_identity
from chaos_ext.db.errors import DatabaseError

__all__ = [
    "APPLICATION_PREFIX",
    "DSN_VAR",
    "ORPHAN_KIND",
    "application_name",
    "find_sessions",
    "scan_dsn",
]

KIND = "db-connections"
ORPHAN_KIND = "db-session-orphan"
APPLICATION_PREFIX = "gameday-exhaust"
DSN_VAR = "GAMEDAY_SCAN_DSN"
_TERMINATE_WAIT_S = 10.0


def scan_dsn() -> str | None:
    """The DSN given to the command (``--db-dsn``), else ``$GAMEDAY_SCAN_DSN``; None if neither."""
    return current_settings().db_dsn or os.environ.get(DSN_VAR) or None


def application_name(entry_id: str) -> str:
    """The application name of a hold's connections (at most 63 bytes: PostgreSQL's limit)."""
    return f"{APPLICATION_PREFIX}-{entry_id}"


def _where(dsn: str) -> str:
    """The server a DSN names, without its credentials."""
    parts = urlsplit(dsn)
    if parts.scheme.startswith("postgres"):
        return f"postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"
    return "postgresql (DSN given)"


def _connect(dsn: str) -> Any:
    import psycopg  # noqa: PLC0415 - the driver only when a DSN is given

    try:
        return psycopg.connect(
            dsn, connect_timeout=5, autocommit=True, application_name="gameday-scan"
        )
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to {_where(dsn)}: {str(exc).strip()[:200]}") from None


def _sessions(conn: Any) -> dict[str, list[int]]:
    rows = conn.execute(
        "SELECT application_name, pid FROM pg_stat_activity"
        " WHERE application_name LIKE %s AND pid <> pg_backend_pid() ORDER BY pid",
        (APPLICATION_PREFIX + "%",),
    ).fetchall()
    found: dict[str, list[int]] = {}
    for name, pid in rows:
        found.setdefault(str(name), []).append(int(pid))
    return found


def _leftover(where: str, server: dict[str, str], name: str, pids: list[int]) -> Leftover:
    entry_id = name[len(APPLICATION_PREFIX) + 1 :]
    system = server.get("system_identifier")

    def refers(entry: Entry) -> bool:
        if entry_id:
            return entry.id == entry_id
        recorded = ((entry.identity or {}).get("database") or {}).get("server") or {}
        return entry.kind == KIND and recorded.get("system_identifier") in (None, system)

    recipe: dict[str, Any] = {"server": where, "system_identifier": system, "pids": pids}
    recipe["application_name"] = name
    return Leftover(
        ref=f"db:{system}:{name}",
        kind=KIND,
        what=f"{len(pids)} session(s) {name} on {where} (pid {', '.join(map(str, pids))})",
        adoption=Adoption(
            kind=ORPHAN_KIND,
            module=__name__,
            target=f"{where} {name}",
            recipe=recipe,
            identity=machine_scope(database={"server": server, "where": where}),
        ),
        refers=refers,
    )


def find_sessions(dsn: str) -> tuple[list[Leftover], list[str]]:
    """Every session of a hold on the PostgreSQL server ``dsn`` reaches."""
    conn = _connect(dsn)
    try:
        server = server_identity(conn, "postgresql")
        where = _where(dsn)
        found = [_leftover(where, server, n, p) for n, p in sorted(_sessions(conn).items())]
    finally:
        conn.close()
    return found, []


def undo_sessions(entry: Entry) -> str:
    """End the orphan's sessions on the recorded server (never another one)."""
    recipe = entry.recipe
    dsn = scan_dsn()
    if not dsn:
        raise DatabaseError(
            f"give the server's DSN (--db-dsn) to end sessions on {recipe['server']}"
        )
    conn = _connect(dsn)
    try:
        now = server_identity(conn, "postgresql").get("system_identifier")
        if now != recipe["system_identifier"]:
            raise DatabaseError(
                f"the DSN reaches server {now}, not {recipe['system_identifier']}: refusing"
            )
        name, pids = recipe["application_name"], [int(p) for p in recipe["pids"]]
        query = (
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid = ANY(%s)"
        )
        ended = sum(1 for (ok,) in conn.execute(query, (name, pids)).fetchall() if ok)
        deadline = time.monotonic() + _TERMINATE_WAIT_S
        while _sessions(conn).get(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _sessions(conn).get(name, [])
    finally:
        conn.close()
    if left:
        raise DatabaseError(f"{len(left)} session(s) {name} still there after termination")
    if not ended:
        return f"sessions {name} on {recipe['server']} already gone"
    return f"ended {ended} session(s) {name} on {recipe['server']}"
