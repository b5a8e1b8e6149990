"""plan_change_sidecar_template asks whether the ConfigMap may be patched and its backup
created and deleted, and names a denial.

Access reviews answered by the emulator's RBAC authorizer double
(:mod:`support.k8s_authorizer`), from the rules each test sets.
"""

from __future__ import annotations

from typing import Any

from support.k8s_authorizer import AllowRule
from support.k8s_emulator import EmulatorHandle

from chaos_ext.sidecar.plan import plan_change_sidecar_template

READS = AllowRule(("get", "list"), ("*",), ("*",))  # what the plan itself reads
CHANGE = {"values_patch": {"global": {"tag": "1.23.1"}}}


def _rbac(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in plan["preflight"] if c["check"].startswith("RBAC")]


def test_patch_of_the_injector_configmap_is_asked_and_a_denial_named(
    emulator: EmulatorHandle, mesh: dict[str, Any]
) -> None:
    backup = AllowRule(("create", "delete"), ("configmaps",), namespace="istio-system")
    emulator.allow(READS, backup)
    (denied,) = _rbac(plan_change_sidecar_template(**CHANGE))
    assert denied["check"] == "RBAC: patch configmaps istio-sidecar-injector"
    assert not denied["ok"]
    assert "denied in namespace istio-system (needed to change the template" in denied["detail"]

    elsewhere = AllowRule(("patch",), ("configmaps",), namespace="default")
    emulator.allow(READS, backup, elsewhere)
    assert not _rbac(plan_change_sidecar_template(**CHANGE))[0]["ok"]

    exact = AllowRule(
        ("patch",), ("configmaps",), namespace="istio-system", names=("istio-sidecar-injector",)
    )
    emulator.allow(READS, exact)  # the backup's create and delete no longer allowed
    denials = [c["check"] for c in _rbac(plan_change_sidecar_template(**CHANGE)) if not c["ok"]]
    assert denials == ["RBAC: create configmaps", "RBAC: delete configmaps"], denials

    emulator.allow(READS, backup, exact)
    plan = plan_change_sidecar_template(**CHANGE)
    (allowed,) = _rbac(plan)
    assert allowed["ok"] and "patch configmaps istio-sidecar-injector" in allowed["detail"]
    assert all(c["ok"] for c in plan["preflight"]), plan["preflight"]
