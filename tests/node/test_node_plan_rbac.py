"""`gameday plan` asks the API server whether the drain's calls are allowed, and names a denial.

The real client over HTTP against the API emulator, whose access reviews are
answered by :mod:`support.k8s_authorizer` (a test double of the RBAC
authorizer: kmock authorizes nothing itself), from the rules each test sets.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from support import k8s_objects as o
from support.harness import wait_for
from support.k8s_authorizer import AllowRule
from support.k8s_cluster import KINDS, is_ready
from support.k8s_emulator import EmulatorHandle

from chaos_ext._core.rbac import Rule, rbac_of
from chaos_ext.node.actions import drain_nodes
from chaos_ext.node.plan import plan_drain_nodes

SELECTOR = "role=eat-workers"
#: what the plan itself reads (get/list): granted in every test, so only the drain's needs vary
READS = AllowRule(("get", "list"), ("nodes", "pods", "poddisruptionbudgets"), ("", "policy"))
NEEDED = [
    AllowRule(("get",), ("namespaces",), names=("kube-system",)),
    AllowRule(("patch",), ("nodes",), names=("worker-0",)),
    AllowRule(("create",), ("pods/eviction",), namespace="shop"),
]


def _objects(emulator: EmulatorHandle) -> str:
    return json.dumps({kind: emulator.items(kind) for kind in sorted(KINDS)}, sort_keys=True)


def _shop(emulator: EmulatorHandle) -> None:
    emulator.put(o.deployment("shop", "web", replicas=2, nodes=["worker-0"]))
    wait_for(
        lambda: len(pods := emulator.items("Pod", "shop")) == 2 and all(map(is_ready, pods)),
        10,
        "the shop's pods Ready",
    )


def _rbac(plan: dict[str, object]) -> list[dict[str, object]]:
    checks = plan["preflight"]
    assert isinstance(checks, list)
    return [c for c in checks if str(c["check"]).startswith("RBAC")]


def _as_allow(rule: Rule) -> AllowRule:
    """A declared rule as the authorizer double's rule, bound cluster-wide (a ClusterRole)."""
    return AllowRule(rule.verbs, (rule.resource,), (rule.api_group,), None, rule.resource_names)


def test_every_call_allowed_passes_and_each_review_is_what_the_drain_calls(
    emulator: EmulatorHandle, pool: list[str], ledger_path: Path
) -> None:
    _shop(emulator)
    emulator.allow(READS, *NEEDED)
    plan = plan_drain_nodes(SELECTOR, count=1, pick="first")
    (rbac,) = _rbac(plan)
    assert rbac["ok"], rbac
    assert all(c["ok"] for c in plan["preflight"]), plan["preflight"]
    reviews = set(emulator.access_reviews())
    assert "create /pods/eviction shop  -> allowed" in reviews
    assert "patch /nodes  worker-0 -> allowed" in reviews
    assert "get /namespaces  kube-system -> allowed" in reviews
    assert not any("delete" in r for r in reviews)  # force=false: no pod is deleted

    # what `gameday schedule` grants the drain (its @needs_k8s rules) passes too
    emulator.allow(READS, *(_as_allow(r) for r in rbac_of(drain_nodes)))
    assert all(c["ok"] for c in plan_drain_nodes(SELECTOR, count=1, pick="first")["preflight"])
    assert not ledger_path.exists()


def test_eviction_granted_in_another_namespace_only_is_denied_in_the_pods_namespace(
    emulator: EmulatorHandle, pool: list[str]
) -> None:
    _shop(emulator)
    emulator.allow(
        READS, *NEEDED[:2], AllowRule(("create",), ("pods/eviction",), namespace="other")
    )
    (denied,) = _rbac(plan_drain_nodes(SELECTOR, count=1, pick="first"))
    assert denied["check"] == "RBAC: create pods/eviction" and not denied["ok"]
    assert "denied in namespace shop (needed to evict its pods)" in str(denied["detail"])
    forced = _rbac(plan_drain_nodes(SELECTOR, count=1, pick="first", force=True))
    assert {c["check"] for c in forced} == {"RBAC: create pods/eviction", "RBAC: delete pods"}


def test_gameday_plan_names_the_missing_permission_and_injects_nothing(
    emulator: EmulatorHandle,
    pool: list[str],
    ledger_path: Path,
    tmp_path: Path,
    gameday: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    _shop(emulator)
    emulator.allow(READS, *NEEDED[:2])  # no pods/eviction create
    experiment = {
        "title": "drain one worker",
        "description": "x",
        "method": [
            {
                "type": "action",
                "name": "drain-one",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.node.actions",
                    "func": "drain_nodes",
                    "arguments": {"label_selector": SELECTOR, "count": 1, "pick": "first"},
                },
            }
        ],
    }
    (tmp_path / "drain.json").write_text(json.dumps(experiment))
    before, calls_before = _objects(emulator), len(emulator.api_calls())

    result = gameday("plan", "drain.json", "--json", "plan.json")

    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1, out
    assert "✗ RBAC: create pods/eviction: create pods/eviction is denied in namespace shop" in out
    assert _objects(emulator) == before  # nothing cordoned or evicted
    assert {c.split()[0] for c in emulator.api_calls()[calls_before:]} <= {"get", "list"}
    assert not ledger_path.exists()
    (planned,) = json.loads((tmp_path / "plan.json").read_text())["plans"]
    (row,) = planned["actions"]
    assert row["status"] == "preflight failed"
    assert [c["check"] for c in row["plan"]["preflight"] if not c["ok"]] == [
        "RBAC: create pods/eviction"
    ]

    emulator.allow(READS, *NEEDED)
    again = gameday("plan", "drain.json")
    assert again.returncode == 0, again.stdout + again.stderr
