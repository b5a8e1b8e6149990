"""plan_drain_nodes against the API emulator over HTTP: the budgets that block, nothing touched."""

from __future__ import annotations

import json
from pathlib import Path

from support import k8s_objects as o
from support.harness import wait_for
from support.k8s_cluster import KINDS, is_ready
from support.k8s_emulator import EmulatorHandle

from chaos_ext.node.plan import plan_drain_nodes

SELECTOR = "role=eat-workers"


def _objects(emulator: EmulatorHandle) -> str:
    """Every object of every kind the emulator serves, as bytes to compare."""
    every = {kind: emulator.items(kind) for kind in sorted(KINDS)}
    return json.dumps(every, sort_keys=True)


def _settled(emulator: EmulatorHandle, pods: int) -> None:
    wait_for(
        lambda: (
            len(emulator.items("Pod", "shop")) == pods
            and all(is_ready(p) for p in emulator.items("Pod", "shop"))
        ),
        10,
        "the shop's pods Ready",
    )


def test_plan_names_the_budget_that_forbids_the_eviction_and_touches_nothing(
    emulator: EmulatorHandle, pool: list[str], ledger_path: Path
) -> None:
    emulator.put(o.deployment("shop", "web", replicas=3, nodes=["worker-0"]))
    emulator.put(o.deployment("shop", "api", replicas=2, nodes=["worker-0"]))
    emulator.put(o.pdb("shop", "web", match_labels={"app": "web"}, min_available=3))
    emulator.put(o.pdb("shop", "api", match_labels={"app": "api"}, max_unavailable=1))
    _settled(emulator, 5)
    before, calls_before = _objects(emulator), len(emulator.api_calls())

    plan = plan_drain_nodes(SELECTOR, count=1, pick="first")

    assert _objects(emulator) == before  # byte-identical: nothing cordoned, evicted, patched
    verbs = {call.split()[0] for call in emulator.api_calls()[calls_before:]}
    assert verbs <= {"get", "list"}, verbs
    assert not ledger_path.exists()
    assert plan["targets"] == ["node/worker-0"]
    (node,) = plan["blast_radius"]["nodes"]
    assert node["name"] == "worker-0" and len(node["pods"]) == 5
    verdicts = {
        j["pod"].split("/")[1].split("-")[0]: set() for j in plan["blast_radius"]["evictions"]
    }
    for j in plan["blast_radius"]["evictions"]:
        verdicts[j["pod"].split("/")[1].split("-")[0]].add(j["verdict"])
    assert verdicts == {"web": {"blocked"}, "api": {"allowed", "waits"}}
    budgets = {c["check"]: c for c in plan["preflight"]}["disruption budgets"]
    assert not budgets["ok"]
    assert "blocked by PodDisruptionBudget shop/web" in budgets["detail"]
    assert "shop/api" not in budgets["detail"]


def test_plan_within_the_budgets_passes_every_preflight(
    emulator: EmulatorHandle, pool: list[str]
) -> None:
    emulator.put(o.deployment("shop", "web", replicas=2, nodes=["worker-1"]))
    emulator.put(o.pdb("shop", "web", match_labels={"app": "web"}, max_unavailable=1))
    _settled(emulator, 2)
    plan = plan_drain_nodes(SELECTOR, count=1, pick="first")
    assert plan["targets"] == ["node/worker-0"]  # by name: worker-0 runs nothing
    assert all(c["ok"] for c in plan["preflight"]), plan["preflight"]
    too_many = plan_drain_nodes(SELECTOR, count=3, pick="first")
    radius = {c["check"]: c for c in too_many["preflight"]}["blast radius"]
    assert not radius["ok"] and "every Ready node" in radius["detail"]
