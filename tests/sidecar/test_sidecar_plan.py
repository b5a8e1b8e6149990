"""plan_change_sidecar_template against the emulator: the workloads reached, nothing patched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.k8s_cluster import KINDS
from support.k8s_emulator import EmulatorHandle

from chaos_ext.sidecar.actions import change_sidecar_template, restore_sidecar_template
from chaos_ext.sidecar.plan import plan_change_sidecar_template
from chaos_ext.sidecar.probes import sidecar_drift


def _objects(emulator: EmulatorHandle) -> str:
    return json.dumps({kind: emulator.items(kind) for kind in sorted(KINDS)}, sort_keys=True)


def test_plan_lists_the_workloads_the_change_reaches_and_patches_nothing(
    emulator: EmulatorHandle, mesh: dict[str, Any], ledger_path: Path
) -> None:
    before, calls_before = _objects(emulator), len(emulator.api_calls())
    plan = plan_change_sidecar_template(values_patch={"global": {"tag": "1.23.1"}})
    assert _objects(emulator) == before
    assert {c.split()[0] for c in emulator.api_calls()[calls_before:]} <= {"get", "list"}
    assert not ledger_path.exists()
    radius = plan["blast_radius"]
    assert radius["changed_keys"] == ["values"]
    assert radius["backup_configmap"] == "istio-system/gameday-backup-<ledger id>"
    assert plan["would"].startswith("create the backup ConfigMap istio-system/gameday-backup-")
    assert radius["pods_with_sidecar"] == 10 and radius["pods_without_sidecar"] == 2
    assert radius["pods_reached"] == 10
    reached = {w.split(" ")[0] for w in radius["workloads_reached"]}
    assert reached == {
        "Deployment/shop/web",
        "Deployment/shop/cart",
        "Deployment/payments/api",
        "DaemonSet/logging/fluentbit",
    }
    assert all(c["ok"] for c in plan["preflight"])

    # the run's own drift afterwards agrees with the plan
    changed = change_sidecar_template(values_patch={"global": {"tag": "1.23.1"}})
    try:
        assert sidecar_drift()["drifted_pods"] == radius["pods_reached"]
        assert emulator.get("ConfigMap", "istio-system", f"gameday-backup-{changed['ledger_id']}")
    finally:
        restore_sidecar_template()
    assert (
        emulator.get("ConfigMap", "istio-system", f"gameday-backup-{changed['ledger_id']}") is None
    )
    same = plan_change_sidecar_template(values_patch={"global": {"tag": "1.22.3"}})
    assert not same["preflight"][0]["ok"] and same["blast_radius"]["pods_reached"] == 0
