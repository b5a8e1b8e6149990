"""The network fault kinds, declared once (see :mod:`chaos_ext._core.ledger.kinds`)."""

from __future__ import annotations

from chaos_ext._core.ledger import FAULT_KINDS, LOCAL, FaultKind, Scan
from chaos_ext.network.actions import KIND, _undo_latency
from chaos_ext.network.leftovers import ORPHAN_KIND, find_trees, undo_orphan_tree
from chaos_ext.network.plan import plan_add_latency

__all__ = ["LATENCY", "LATENCY_ORPHAN"]

LATENCY = FaultKind(
    name=KIND,
    summary="delay (and jitter, loss) packets a target sends, optionally only to some CIDRs",
    module="chaos_ext.network.actions",
    actions={"add_latency": plan_add_latency},
    rollback="remove_latency",
    undo=_undo_latency,
    scan=Scan(
        "qdiscs", "root qdisc 1d1a: on any interface of every network namespace", LOCAL, find_trees
    ),
    ends_by_itself="at duration_seconds when > 0 (timer, and the watchdog if the runner dies)",
    failpoints=("netem.mid-apply", "netem.mid-undo"),
    docs="docs/network.md",
)
LATENCY_ORPHAN = FaultKind(
    name=ORPHAN_KIND,
    summary="a latency tree no ledger entry owns: deleted by gameday rollback --orphans",
    role="adoption",
    undo=undo_orphan_tree,
    adopts=KIND,
    docs="docs/ledger.md",
)
FAULT_KINDS.declare(LATENCY, LATENCY_ORPHAN)
