"""Plan of the database fault: what ``exhaust_connections`` would hold, read from the server.

One short read-only connection (like ``connection_headroom``): the server's
identity, ``max_connections``, the reserved slots and the client connections
in use, so the number of connections the holder would keep is exact. Nothing
is recorded in the ledger and nothing is held.
"""

from __future__ import annotations

from typing import Any

from chaos_ext._core.contract import PlanCall, plan_for, plan_result, preflight_check
from chaos_ext.db._credentials import connect_params
from chaos_ext.db._engines import (
    ConnectFailure,
    close,
    connect,
    scrub,
    server_identity,
    standing_capacity,
)
from chaos_ext.db._target import Capacity, parse_target, planned_total
from chaos_ext.db.actions import exhaust_connections

__all__ = ["plan_exhaust_connections"]


def _superuser_reserved(conn: Any, engine: str) -> int:
    if engine != "postgresql":
        return 0  # MySQL's extra SUPER slot comes on top of max_connections
    row = conn.execute("SELECT current_setting('superuser_reserved_connections')::int").fetchone()
    return int(row[0])


def _would_hold(target: Any, cap: Capacity) -> tuple[int, int]:
    """(connections the holder would keep, slots a normal user could take without the plan's)."""
    available = cap.usable_free + 1  # the plan's own connection is the holder's first one
    total = planned_total(target, cap)
    return (available if total is None else min(total, available)), available


@plan_for(exhaust_connections)
def plan_exhaust_connections(call: PlanCall) -> dict[str, Any]:
    """What ``exhaust_connections`` would hold on this server, from one read-only connection."""
    args = call.arguments
    params = connect_params(
        **{k: args[k] for k in ("engine", "host", "port", "database", "user")},
        connect_timeout=args["connect_timeout_seconds"],
        secrets=call.secrets,
        application_name="gameday-plan",
    )
    hold_seconds = args["hold_seconds"]
    wanted = parse_target(args["target"])
    where = f"{params.engine}://{params.host}:{params.port}/{params.database}"
    radius: dict[str, Any] = {
        "server": where,
        "user": params.user,
        "target": str(wanted),
        "hold_seconds": hold_seconds,
    }
    try:
        conn = connect(params)
    except ConnectFailure as exc:
        check = preflight_check("connect", False, scrub(exc.message, params.password))
        return plan_result(
            action="exhaust_connections",
            targets=[where],
            would="hold nothing: the server refused the plan's connection",
            preflight=[check],
            blast_radius=radius,
        )
    try:
        cap = standing_capacity(conn, params.engine)  # as the holder reads it
        identity = server_identity(conn, params.engine)
        superuser = _superuser_reserved(conn, params.engine)
    finally:
        close(conn)
    held, available = _would_hold(wanted, cap)
    radius.update(
        {
            "server_identity": identity,
            "max_connections": cap.max_connections,
            "superuser_reserved_connections": superuser,
            "reserved_for_this_user": cap.reserved,
            "in_use": cap.in_use - 1,
            "free_for_this_user": available,
            "would_hold": held,
            "left_free": available - held,
        }
    )
    checks = [
        preflight_check("connect", True, f"logged in as {params.user} ({identity['version']})"),
        preflight_check(
            "free slots",
            held > 0 and available > 0,
            f"{available} slot(s) free for {params.user}, {held} would be held",
        ),
    ]
    return plan_result(
        action="exhaust_connections",
        targets=[where],
        would=f"hold {held} connection(s) to {where} for {hold_seconds:g} s"
        f" ({available - held} left free for {params.user})",
        preflight=checks,
        blast_radius=radius,
    )
