"""The database fault kinds, declared once (see :mod:`chaos_ext._core.ledger.kinds`)."""

from __future__ import annotations

from chaos_ext._core.ledger import DATABASE, FAULT_KINDS, FaultKind, Scan
from chaos_ext.db.actions import KIND, _release_holder
from chaos_ext.db.leftovers import ORPHAN_KIND, find_sessions, undo_sessions
from chaos_ext.db.plan import plan_exhaust_connections

__all__ = ["CONNECTIONS", "SESSION_ORPHAN"]

CONNECTIONS = FaultKind(
    name=KIND,
    summary="hold a database's connections until it refuses new ones (RDS at 50-60 of 90)",
    module="chaos_ext.db.actions",
    actions={"exhaust_connections": plan_exhaust_connections},
    rollback="release_connections",
    undo=_release_holder,
    scan=Scan(
        "database sessions (PostgreSQL)",
        "sessions named gameday-exhaust-<entry id> (application_name), with a DSN",
        DATABASE,
        find_sessions,
    ),
    ends_by_itself="at hold_seconds (the holder's own cap, the timer and the watchdog)",
    failpoints=("helper.started", "helper.stopping"),
    docs="docs/db.md",
)
SESSION_ORPHAN = FaultKind(
    name=ORPHAN_KIND,
    summary="database sessions no ledger entry owns: ended by gameday rollback --orphans",
    role="adoption",
    undo=undo_sessions,
    adopts=KIND,
    docs="docs/ledger.md",
)
FAULT_KINDS.declare(CONNECTIONS, SESSION_ORPHAN)
