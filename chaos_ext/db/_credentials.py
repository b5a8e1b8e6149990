"""Connection parameters from activity arguments and Chaos Toolkit secrets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaos_ext.db._engines import ConnectParams
from chaos_ext.db._target import DEFAULT_PORTS, engine_of
from chaos_ext.errors import InvalidArgument

__all__ = ["connect_params"]


def connect_params(
    *,
    engine: str,
    host: str,
    port: int,
    database: str,
    user: str,
    connect_timeout: float,
    secrets: Mapping[str, Any] | None,
    application_name: str,
) -> ConnectParams:
    """Build :class:`ConnectParams`; ``user``/``password`` come from the secrets.

    The secrets (the provider's ``"secrets": ["db"]`` scope) hold ``password``
    and usually ``user``; a ``user`` argument is used when the secrets have none.
    """
    kind = engine_of(engine)
    found = dict(secrets or {})
    login = str(found.get("user") or user or "")
    if not login:
        raise InvalidArgument(
            "user: no database user; put 'user' and 'password' in the experiment's secrets "
            'and list that scope in the provider ("secrets": ["db"])'
        )
    password = found.get("password")
    if password is not None and not isinstance(password, str):
        raise InvalidArgument("secrets: 'password' must be a string")
    return ConnectParams(
        engine=kind,
        host=host,
        port=port or DEFAULT_PORTS[kind],
        database=database,
        user=login,
        password=password or "",
        connect_timeout=float(connect_timeout),
        application_name=application_name,
    )
