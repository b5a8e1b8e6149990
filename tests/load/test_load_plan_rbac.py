"""plan_drive_http_load in Job mode asks whether the Job and its Secret may be made and deleted.

Access reviews answered by the emulator's RBAC authorizer double
(:mod:`support.k8s_authorizer`), from the rules the test sets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.k8s_authorizer import AllowRule
from support.k8s_emulator import EmulatorHandle

from chaos_ext.load.plan import plan_drive_http_load

IDENTITY = AllowRule(("get",), ("namespaces",), names=("kube-system",))
JOB = {
    "urls": "http://web.shop.svc:8080/",
    "rate": 40,
    "duration_seconds": 30,
    "replicas": 4,
    "kubernetes": {"namespace": "gameday", "pushgateway": "http://pgw.monitoring:9091"},
}


def _failed(plan: dict[str, Any]) -> dict[str, str]:
    return {c["check"]: c["detail"] for c in plan["preflight"] if not c["ok"]}


def test_job_mode_names_each_denied_call_in_the_load_namespace(
    emulator: EmulatorHandle, ledger_path: Path
) -> None:
    emulator.allow(
        IDENTITY,
        AllowRule(("create", "delete"), ("secrets",), namespace="gameday"),
        AllowRule(("delete",), ("jobs",), ("batch",), namespace="gameday"),
    )
    failed = _failed(plan_drive_http_load(**JOB))
    assert list(failed) == ["RBAC: create jobs.batch"]
    assert (
        "denied in namespace gameday (needed to run the load's pods)"
        in failed["RBAC: create jobs.batch"]
    )

    emulator.allow(IDENTITY, AllowRule(("create", "delete"), ("jobs", "secrets"), ("", "batch")))
    assert _failed(plan_drive_http_load(**JOB)) == {}
    assert emulator.items("Job", "gameday") == [] and emulator.items("Secret", "gameday") == []
    assert not ledger_path.exists()
