"""The node kind, declared once (see :mod:`chaos_ext._core.ledger.kinds`)."""

from __future__ import annotations

from chaos_ext._core.ledger import CLUSTER, FAULT_KINDS, FaultKind, Scan
from chaos_ext.node.actions import KIND, _undo_drain
from chaos_ext.node.leftovers import find_cordons
from chaos_ext.node.plan import plan_drain_nodes

__all__ = ["DRAIN"]


DRAIN = FaultKind(
    name=KIND,
    summary="cordon and drain nodes (evictions that respect PodDisruptionBudgets)",
    module="chaos_ext.node.actions",
    actions={"drain_nodes": plan_drain_nodes},
    rollback="uncordon_drained_nodes",
    undo=_undo_drain,
    scan=Scan(
        "cordoned nodes", "nodes annotated chaos-ext.gameday/cordoned-by", CLUSTER, find_cordons
    ),
    ends_by_itself="at uncordon_after_seconds when > 0 (timer, and the watchdog)",
    failpoints=("node-drain.mid-apply", "node-drain.mid-undo"),
    docs="docs/node.md",
)
FAULT_KINDS.declare(DRAIN)
