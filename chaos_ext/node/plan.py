"""Plan of the node drain: the nodes, their pods and the budgets that allow or block each eviction.

The same selection as ``drain_nodes`` (``_drain_plan``: choose, blast radius,
per-pod rules), from the live objects; then each pod to evict is judged
against the PodDisruptionBudgets of its namespace (``_budgets``), and the API
server is asked (access reviews) whether the credentials may make every call
the drain and its undo make. Only get and list calls and access reviews:
nothing is cordoned, evicted or recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from chaos_ext._core.contract import PlanCall, plan_for, plan_result, preflight_check
from chaos_ext._core.k8s import IDENTITY_RULE, api_client, list_items
from chaos_ext._core.k8s_access import Access, access_checks, accesses
from chaos_ext.errors import PreflightFailed
from chaos_ext.node import _budgets
from chaos_ext.node import _drain_plan as plan
from chaos_ext.node.actions import drain_nodes

__all__ = ["plan_drain_nodes"]


def _check(name: str, step: Callable[[], None], passed: str) -> dict[str, Any]:
    try:
        step()
    except PreflightFailed as exc:
        return preflight_check(name, False, str(exc))
    return preflight_check(name, True, passed)


def _budget_check(judged: list[dict[str, Any]]) -> dict[str, Any]:
    blocked = [j for j in judged if j["verdict"] == "blocked"]
    if not blocked:
        waits = sum(1 for j in judged if j["verdict"] == "waits")
        return preflight_check(
            "disruption budgets", True, f"every eviction allowed ({waits} wait for a replacement)"
        )
    shown = "; ".join(
        f"{j['pod']} blocked by PodDisruptionBudget {', '.join(j['blocking'])}"
        for j in blocked[:10]
    )
    return preflight_check("disruption budgets", False, f"{len(blocked)} eviction(s): {shown}")


def _drain_accesses(
    names: list[str], evicted: list[plan.PodInfo], *, force: bool, wait_for_deletion: bool
) -> list[Access]:
    """What ``drain_nodes`` and its undo ask of the API (actions.py, _evict.py), for these pods."""
    wanted = [
        *accesses(IDENTITY_RULE, why="record the cluster's identity in the ledger"),
        Access("list", "nodes", why="choose the nodes matching the selector"),
        Access("list", "pods", why="find the pods on the chosen nodes (every namespace)"),
    ]
    for name in names:
        wanted.append(Access("patch", "nodes", name=name, why="cordon it, and uncordon it (undo)"))
        wanted.append(Access("get", "nodes", name=name, why="read it before uncordoning (undo)"))
    for ns in sorted({p.namespace for p in evicted}):
        wanted.append(Access("create", "pods/eviction", namespace=ns, why="evict its pods"))
        if wait_for_deletion:
            wanted.append(Access("get", "pods", namespace=ns, why="await each evicted pod's end"))
        if force:
            wanted.append(
                Access("delete", "pods", namespace=ns, why="delete pods past their budget (force)")
            )
    return wanted


def _budgets_now(policy: client.PolicyV1Api, core: client.CoreV1Api) -> list[_budgets.Budget]:
    pdbs = list_items(
        policy.list_pod_disruption_budget_for_all_namespaces, what="list PodDisruptionBudgets"
    )
    found = []
    for pdb in pdbs:
        ns = (pdb.get("metadata") or {}).get("namespace", "")
        needs_pods = (pdb.get("status") or {}).get("disruptionsAllowed") is None
        pods = (
            list_items(core.list_namespaced_pod, ns, what=f"list pods in {ns}")
            if needs_pods
            else []
        )
        found.append(_budgets.budget_of(pdb, pods))
    return found


@plan_for(drain_nodes)
def plan_drain_nodes(call: PlanCall) -> dict[str, Any]:
    """The nodes ``drain_nodes`` would cordon, their pods and the budgets of each eviction."""
    a = call.arguments
    label_selector, pick, force = a["label_selector"], a["pick"], a["force"]
    count, percent, max_fraction = a["count"], a["percent"], a["max_fraction"]
    api = api_client(call.secrets)
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    nodes = [
        plan.NodeInfo.from_manifest(n)
        for n in list_items(
            core.list_node,
            label_selector=label_selector,
            what=f"list nodes matching {label_selector!r}",
        )
    ]
    wanted = plan.wanted_count(nodes, count=count, percent=percent)
    chosen = plan.choose_nodes(nodes, count=count, percent=percent, pick=pick)
    checks = [
        _check(
            "blast radius",
            lambda: plan.check_blast_radius(
                nodes, chosen, max_fraction=max_fraction, selector=label_selector, wanted=wanted
            ),
            f"{len(chosen)} of {sum(1 for n in nodes if n.ready)} Ready node(s), "
            f"max_fraction={max_fraction:g}",
        )
    ]
    manifests = {}
    for node in chosen:
        for pod in list_items(
            core.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={node.name}",
            what=f"list pods on node {node.name}",
        ):
            manifests[plan.PodInfo.from_manifest(pod).key] = pod
    plans = plan.plan_pods(
        [plan.PodInfo.from_manifest(p) for p in manifests.values()],
        delete_emptydir_data=a["delete_emptydir_data"],
        force=force,
    )
    checks.append(_check("pods drainable", lambda: plan.refusals(plans), "no pod needs a flag"))
    checks.append(
        _check(
            "protected namespaces",
            lambda: plan.check_protected(plans, a["protected_namespaces"] or []),
            "no pod of a protected namespace",
        )
    )
    order = plan.interleave([p.pod for p in plans if p.action == "evict"])
    judged = _budgets.judge_evictions([manifests[p.key] for p in order], _budgets_now(policy, core))
    checks.append(_budget_check(judged))
    checks += access_checks(
        api,
        _drain_accesses(
            [n.name for n in chosen], order, force=force, wait_for_deletion=a["wait_for_deletion"]
        ),
    )
    names = [n.name for n in chosen]
    radius = {
        "label_selector": label_selector,
        "pick": pick,
        "candidates": sorted(n.name for n in nodes if n.ready and not n.unschedulable),
        "nodes": [
            {"name": n.name, "pods": [p.as_dict() for p in plans if p.pod.node == n.name]}
            for n in chosen
        ],
        "evictions": judged,
        "force": force,
        "timeout_seconds": a["timeout_seconds"],
    }
    if pick == "random":
        radius["note"] = "pick=random: the run draws its own nodes among the candidates"
    return plan_result(
        action="drain_nodes",
        targets=[f"node/{n}" for n in names],
        would=f"cordon {', '.join(names) or 'no node'} and evict {len(order)} pod(s)"
        f" ({sum(1 for p in plans if p.action == 'skip')} skipped)",
        preflight=checks,
        blast_radius=radius,
    )
