"""Pure argument checks and connection-count arithmetic for the db activities.

Nothing here talks to a database: ``gameday validate`` runs these checks, and
the connection holder computes how many connections to open from a
:class:`Capacity` read off the server.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from chaos_ext._core.validation import require_range
from chaos_ext.errors import InvalidArgument

__all__ = [
    "DEFAULT_PORTS",
    "MAX_HOLD",
    "Capacity",
    "Target",
    "check_exhaust_arguments",
    "check_headroom_arguments",
    "engine_of",
    "max_ceiling",
    "parse_target",
    "planned_total",
    "require_host",
]

ENGINES = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "aurora-mysql": "mysql",
}
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}
MAX_HOLD = 10_000  # never hold more connections than this, whatever the target says
_MAX_MINUS = re.compile(r"^max-minus-(\d{1,5})$")
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?$")
_DB_NAME = re.compile(r"^[A-Za-z0-9_$-]{1,63}$")


@dataclass(frozen=True)
class Target:
    """How many connections to hold: ``count`` of them, up to the refusal, or all but ``n``."""

    kind: Literal["count", "max", "max-minus"]
    n: int = 0

    def __str__(self) -> str:
        return {"count": str(self.n), "max": "max", "max-minus": f"max-minus-{self.n}"}[self.kind]


@dataclass(frozen=True)
class Capacity:
    """Connection slots as the server reports them.

    ``reserved`` are slots a normal user cannot take (PostgreSQL's
    superuser_reserved_connections; 0 for MySQL, whose extra SUPER slot comes
    on top of max_connections). ``in_use`` counts client connections,
    including the one that asked.
    """

    max_connections: int
    reserved: int
    in_use: int

    @property
    def usable_free(self) -> int:
        """Connections a normal user can still open."""
        return max(0, self.max_connections - self.reserved - self.in_use)


def engine_of(value: Any) -> str:
    """``postgresql`` or ``mysql`` (aliases: postgres, mariadb, aurora-mysql)."""
    engine = ENGINES.get(str(value).strip().lower()) if isinstance(value, str) else None
    if engine is None:
        raise InvalidArgument(
            f"engine: {value!r} is not supported (use one of: {', '.join(sorted(ENGINES))})"
        )
    return engine


def parse_target(value: Any) -> Target:
    """A number of connections, ``"max"`` or ``"max-minus-N"``."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= MAX_HOLD:
            raise InvalidArgument(f"target: {value} is outside [1, {MAX_HOLD}]")
        return Target("count", value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "max":
            return Target("max")
        match = _MAX_MINUS.match(text)
        if match and int(match.group(1)) <= MAX_HOLD:
            return Target("max-minus", int(match.group(1)))
    raise InvalidArgument(
        f"target: {value!r} is not a number of connections, 'max' or 'max-minus-N' "
        '(e.g. 40, "max", "max-minus-10")'
    )


def planned_total(target: Target, capacity: Capacity) -> int | None:
    """Connections to hold in all (counting the one already open), None for "max".

    For ``max-minus-N``: all the slots a normal user can still take, minus N.
    """
    if target.kind == "count":
        return target.n
    if target.kind == "max-minus":
        return max(1, 1 + capacity.usable_free - target.n)
    return None


def max_ceiling(capacity: Capacity) -> int:
    """When "max" stops if the server never refuses (a pooler in front): a bound."""
    return min(MAX_HOLD, max(2 * capacity.max_connections, capacity.max_connections + 50))


def require_host(label: str, value: Any) -> str:
    """A host name or an IP address."""
    if isinstance(value, str):
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if _HOSTNAME.match(value):
                return value
        else:
            return value
    raise InvalidArgument(f"{label}: {value!r} is not a host name or an IP address")


def _check_connection(arguments: Mapping[str, Any]) -> None:
    engine_of(arguments.get("engine"))
    require_host("host", arguments.get("host", "127.0.0.1"))
    require_range("port", arguments.get("port", 0), 0, 65535)
    require_range("connect_timeout_seconds", arguments.get("connect_timeout_seconds", 5.0), 1, 120)
    database = arguments.get("database", "")
    if database and (not isinstance(database, str) or not _DB_NAME.match(database)):
        raise InvalidArgument(f"database: {database!r} is not a database name")
    user = arguments.get("user", "")
    if user and (not isinstance(user, str) or not _DB_NAME.match(user)):
        raise InvalidArgument(f"user: {user!r} is not a user name")


def check_exhaust_arguments(arguments: Mapping[str, Any]) -> None:
    """The semantic check of ``exhaust_connections`` (also run by ``gameday validate``)."""
    _check_connection(arguments)
    parse_target(arguments.get("target", "max"))
    require_range("hold_seconds", arguments.get("hold_seconds", 60.0), 1, 86_400)
    require_range("open_concurrency", arguments.get("open_concurrency", 16), 1, 512)
    keepalive = arguments.get("keepalive_seconds", 0.0)
    if keepalive != 0:
        require_range("keepalive_seconds", keepalive, 1, 3_600)
    refill = arguments.get("refill_seconds", 0.0)
    if refill != 0:
        require_range("refill_seconds", refill, 0.2, 3_600)


def check_headroom_arguments(arguments: Mapping[str, Any]) -> None:
    """The semantic check of ``connection_headroom``."""
    _check_connection(arguments)
