"""The load kind, declared once (see :mod:`chaos_ext._core.ledger.kinds`)."""

from __future__ import annotations

from chaos_ext._core.ledger import CLUSTER, FAULT_KINDS, FaultKind, Scan
from chaos_ext.load.actions import KIND, _undo_load
from chaos_ext.load.leftovers import find_jobs
from chaos_ext.load.plan import plan_drive_http_load

__all__ = ["LOAD"]


LOAD = FaultKind(
    name=KIND,
    summary="drive bounded HTTP load (a rate profile), locally or from a Kubernetes Job",
    module="chaos_ext.load.actions",
    actions={"drive_http_load": plan_drive_http_load},
    rollback="stop_http_load",
    undo=_undo_load,
    scan=Scan(
        "load Jobs",
        "Jobs labelled app.kubernetes.io/managed-by=gameday,gameday.io/load"
        " (local loads: the helpers part)",
        CLUSTER,
        find_jobs,
    ),
    ends_by_itself="at its duration (the load's own bound)",
    failpoints=("helper.started", "helper.stopping"),
    docs="docs/load.md",
)
FAULT_KINDS.declare(LOAD)
