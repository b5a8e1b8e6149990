"""The sidecar kinds, declared once (see :mod:`chaos_ext._core.ledger.kinds`)."""

from __future__ import annotations

from chaos_ext._core.ledger import CLUSTER, FAULT_KINDS, FaultKind, Scan
from chaos_ext.sidecar.actions import ROLLOUT_KIND, TEMPLATE_KIND, _undo_rollout, _undo_template
from chaos_ext.sidecar.leftovers import find_backups
from chaos_ext.sidecar.plan import plan_change_sidecar_template

__all__ = ["ROLLOUT", "TEMPLATE"]


TEMPLATE = FaultKind(
    name=TEMPLATE_KIND,
    summary="change the sidecar injector's template (reaches pods only when re-created)",
    module="chaos_ext.sidecar.actions",
    actions={"change_sidecar_template": plan_change_sidecar_template},
    rollback="restore_sidecar_template",
    undo=_undo_template,
    scan=Scan(
        "sidecar template backups",
        "backup ConfigMaps labelled chaos-ext.gameday/backup",
        CLUSTER,
        find_backups,
    ),
    failpoints=("sidecar-template.mid-apply", "sidecar-template.mid-undo"),
    docs="docs/sidecar.md",
)
ROLLOUT = FaultKind(
    name=ROLLOUT_KIND,
    summary="restart drifted pods so they get the current template (a remedy: not undone)",
    role="remedy",
    module="chaos_ext.sidecar.actions",
    actions={"rollout_drifted_workloads": None},
    undo=_undo_rollout,
    docs="docs/sidecar.md",
)
FAULT_KINDS.declare(TEMPLATE, ROLLOUT)
