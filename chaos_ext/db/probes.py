"""Database probes: connection headroom on the server, readiness of the app in front of it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.validation import require_range, validated_by
from chaos_ext.db._credentials import connect_params
from chaos_ext.db._engines import ConnectFailure, capacity, close, connect
from chaos_ext.db._target import check_headroom_arguments
from chaos_ext.db.errors import DatabaseError
from chaos_ext.errors import InvalidArgument

__all__ = ["connection_headroom", "http_readiness"]


@validated_by(check_headroom_arguments)
def connection_headroom(
    engine: str,
    host: str = "127.0.0.1",
    port: int = 0,
    database: str = "",
    user: str = "",
    connect_timeout_seconds: float = 5.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> int:
    """Count the connections a normal user can still open on the database server.

    max_connections minus the slots reserved for superusers (PostgreSQL's
    superuser_reserved_connections) minus the client connections in use
    (pg_stat_activity client backends; MySQL's Threads_connected), not
    counting the probe's own connection. A server that refuses the probe
    for lack of slots has a headroom of 0. Credentials: ``user``/``password``
    from the provider's secrets. Read-only: one short connection.
    """
    arguments = {k: v for k, v in locals().items() if k not in ("configuration", "secrets")}
    check_headroom_arguments(arguments)
    params = connect_params(
        engine=engine,
        host=host,
        port=port,
        database=database,
        user=user,
        connect_timeout=connect_timeout_seconds,
        secrets=secrets,
        application_name="gameday-probe",
    )
    try:
        conn = connect(params)
    except ConnectFailure as failure:
        if failure.limit:
            return 0
        raise DatabaseError(failure.message) from None
    try:
        seen = capacity(conn, params.engine)
    except Exception as exc:  # noqa: BLE001 - any driver error becomes one DatabaseError
        raise DatabaseError(
            f"cannot read the connection counts of {params.where}: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        close(conn)
    return seen.usable_free + 1


def _check_readiness(arguments: Mapping[str, Any]) -> None:
    url = arguments.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgument(f"url: {url!r} is not an http(s) URL")
    require_range("timeout_seconds", arguments.get("timeout_seconds", 2.0), 0.01, 120)
    require_range("expect_status", arguments.get("expect_status", 200), 100, 599)


@validated_by(_check_readiness)
def http_readiness(
    url: str,
    timeout_seconds: float = 2.0,
    expect_status: int = 200,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> bool:
    """Tell whether a readiness endpoint answers with the expected status in time.

    True when a GET of ``url`` returns ``expect_status`` within ``timeout_seconds``
    overall (connect, send, first byte and body); False on another
    status, a connection error or a slower answer. Redirects are not
    followed. Read-only: one request.
    """
    _check_readiness(
        {"url": url, "timeout_seconds": timeout_seconds, "expect_status": expect_status}
    )
    started = time.monotonic()
    try:
        response = httpx.get(url, timeout=timeout_seconds, follow_redirects=False)
    except httpx.HTTPError:
        return False
    elapsed = time.monotonic() - started
    return response.status_code == expect_status and elapsed <= timeout_seconds
