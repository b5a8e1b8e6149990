"""Node actions: drain nodes through the Eviction API, within a blast radius."""

import time
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from chaos_ext._core.contract import (
    LEDGER_ID,
    Configuration,
    Secrets,
    fault_action,
    roll_back,
    rollback_activity,
)
from chaos_ext._core.failpoint import failpoint
from chaos_ext._core.k8s import (
    IDENTITY_RULE,
    api_client,
    call,
    cluster_identity,
    list_items,
    read_json,
    status_of,
    undo_api_client,
)
from chaos_ext._core.ledger import Entry, default_ledger, fault, undo_after
from chaos_ext._core.rbac import Rule, needs_k8s
from chaos_ext._core.validation import require_name, require_range, validated_by
from chaos_ext.errors import InvalidArgument, KubernetesError
from chaos_ext.node import _drain_plan as plan
from chaos_ext.node._evict import EvictionSettings, evict_pods

__all__ = ["drain_nodes", "uncordon_drained_nodes"]

KIND = "node-drain"
DEFAULT_MAX_FRACTION = 1 / 3
_FAILED = ("blocked", "failed", "cancelled", "terminating")


def _check_drain(args: Mapping[str, Any]) -> None:
    selector = args.get("label_selector", "")
    if not isinstance(selector, str) or not selector.strip() or "\n" in selector:
        raise InvalidArgument(
            f"label_selector: {selector!r} must be a non-empty label selector"
            " such as 'role=eat-workers' (draining every node is never what you want)"
        )
    count, percent = args.get("count", 0), args.get("percent", 0)
    require_range("count", count, 0, 10_000)
    require_range("percent", percent, 0, 100)
    if (count > 0) == (percent > 0):
        raise InvalidArgument(
            f"count={count!r}, percent={percent!r}: give exactly one of count > 0"
            " or percent in (0, 100]"
        )
    require_range("max_fraction", args.get("max_fraction", DEFAULT_MAX_FRACTION), 0.01, 1)
    if args.get("pick", "random") not in ("random", "first"):
        raise InvalidArgument(f"pick: {args.get('pick')!r} is not 'random' or 'first'")
    require_range("timeout_seconds", args.get("timeout_seconds", 300), 1, 86_400)
    require_range("parallel", args.get("parallel", 8), 1, 64)
    initial = require_range(
        "backoff_initial_seconds", args.get("backoff_initial_seconds", 0.5), 0.01, 60
    )
    require_range("backoff_max_seconds", args.get("backoff_max_seconds", 8.0), initial, 600)
    require_range("grace_period_seconds", args.get("grace_period_seconds", -1), -1, 3600)
    require_range("uncordon_after_seconds", args.get("uncordon_after_seconds", 0), 0, 86_400)
    for ns in args.get("protected_namespaces") or []:
        require_name("protected_namespaces", ns)


def _pods_on(core: client.CoreV1Api, nodes: list[plan.NodeInfo]) -> list[plan.PodInfo]:
    pods: list[plan.PodInfo] = []
    for node in nodes:
        pods += [
            plan.PodInfo.from_manifest(p)
            for p in list_items(
                core.list_pod_for_all_namespaces,
                field_selector=f"spec.nodeName={node.name}",
                what=f"list pods on node {node.name}",
            )
        ]
    return pods


def _choose(
    core: client.CoreV1Api,
    selector: str,
    count: int,
    percent: float,
    pick: str,
    max_fraction: float,
) -> list[plan.NodeInfo]:
    """The nodes to drain, within the blast radius (PreflightFailed otherwise)."""
    what = f"list nodes matching {selector!r}"
    nodes = [
        plan.NodeInfo.from_manifest(n)
        for n in list_items(core.list_node, label_selector=selector, what=what)
    ]
    wanted = plan.wanted_count(nodes, count=count, percent=percent)
    chosen = plan.choose_nodes(nodes, count=count, percent=percent, pick=pick)
    plan.check_blast_radius(
        nodes, chosen, max_fraction=max_fraction, selector=selector, wanted=wanted
    )
    return chosen


def _plans(
    core: client.CoreV1Api,
    chosen: list[plan.NodeInfo],
    rules: Mapping[str, bool],
    protected: list[str],
) -> list[plan.PodPlan]:
    """What to do with each pod on the chosen nodes; refuses pods that need a flag."""
    plans = plan.plan_pods(_pods_on(core, chosen), **rules)
    plan.refusals(plans)
    plan.check_protected(plans, protected)
    return plans


def _fail_if_blocked(
    names: list[str], outcomes: list[dict[str, Any]], timeout_seconds: float
) -> None:
    failed = [o for o in outcomes if o["outcome"] in _FAILED]
    if failed:
        shown = "; ".join(f"{o['namespace']}/{o['name']}: {o['reason']}" for o in failed[:5])
        raise KubernetesError(
            f"drain of {', '.join(names)}: {len(failed)} pod(s) not evicted within"
            f" timeout_seconds={timeout_seconds:g}: {shown}. The nodes were uncordoned"
        )


def _cordon(core: client.CoreV1Api, node: str, entry_id: str) -> None:
    patch = {
        "spec": {"unschedulable": True},
        "metadata": {"annotations": {plan.CORDON_ANNOTATION: entry_id}},
    }
    call(core.patch_node, node, patch, what=f"cordon node {node}", _preload_content=False)


def _report(
    chosen: list[plan.NodeInfo],
    plans: list[plan.PodPlan],
    outcomes: list[dict[str, Any]],
    entry: Entry,
    t0: float,
) -> dict[str, Any]:
    skipped = [{**p.as_dict(), "outcome": "skipped"} for p in plans if p.action == "skip"]
    every = outcomes + skipped
    counts = {
        k: sum(1 for o in every if o["outcome"] == k)
        for k in ("evicted", "gone", "deleted", "skipped", *_FAILED)
    }
    return {
        LEDGER_ID: entry.id,
        "nodes": [
            {"name": n.name, "cordoned": True, "pods": [o for o in every if o["node"] == n.name]}
            for n in chosen
        ],
        **counts,
        "seconds": round(time.monotonic() - t0, 3),
    }


@fault_action(rollback="uncordon_drained_nodes")
@needs_k8s(
    Rule("", "nodes", ("get", "list", "patch"), cluster_scoped=True),
    # a node runs pods of every namespace: they are read, evicted (and deleted with force)
    # wherever they are
    Rule("", "pods", ("delete", "get", "list"), cluster_scoped=True),
    Rule("", "pods/eviction", ("create",), cluster_scoped=True),
    IDENTITY_RULE,
)
@validated_by(_check_drain)
def drain_nodes(
    label_selector: str,
    count: int = 0,
    percent: float = 0,
    max_fraction: float = DEFAULT_MAX_FRACTION,
    protected_namespaces: list[str] | None = None,
    pick: str = "random",
    delete_emptydir_data: bool = False,
    force: bool = False,
    timeout_seconds: float = 300,
    parallel: int = 8,
    backoff_initial_seconds: float = 0.5,
    backoff_max_seconds: float = 8.0,
    wait_for_deletion: bool = True,
    grace_period_seconds: int = -1,
    uncordon_after_seconds: float = 0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Cordon `count` (or `percent`) nodes matching a selector and evict their pods.

    Evictions go through the Eviction API, so PodDisruptionBudgets hold: a
    refusal (HTTP 429) is retried with exponential backoff until `timeout_seconds`,
    and the pod is only deleted past its budget with `force=true`.
    DaemonSet-managed and mirror pods are skipped; pods with emptyDir volumes
    need `delete_emptydir_data=true`; bare pods need `force=true`.

    Blast radius: refuses, before changing anything, to leave more than
    `max_fraction` (default 1/3, never all) of the Ready nodes matching
    `label_selector` cordoned, or to evict pods of `protected_namespaces`.
    Returns per-node and per-pod outcomes and `ledger_id`. Rollback: the ledger uncordons
    exactly the nodes this drain cordoned (pair with `uncordon_drained_nodes`
    or `gameday rollback`); `uncordon_after_seconds` does it after a delay.
    """
    t0 = time.monotonic()
    api = api_client(secrets)
    core = client.CoreV1Api(api)
    identity = cluster_identity(api, secrets)
    chosen = _choose(core, label_selector, count, percent, pick, max_fraction)
    pod_rules = {"delete_emptydir_data": delete_emptydir_data, "force": force}
    protected = protected_namespaces or []
    _plans(core, chosen, pod_rules, protected)  # refuse before any change
    names = [n.name for n in chosen]
    # spec.unschedulable exactly as it was (false, or absent: null), restored by the undo
    recipe = {"nodes": names, "unschedulable": {n.name: n.unschedulable_field for n in chosen}}
    target = f"nodes {','.join(names)}"
    with fault(
        kind=KIND, target=target, recipe=recipe, module=__name__, identity=identity
    ) as entry:
        for number, name in enumerate(names):
            _cordon(core, name, entry.id)
            if number == 0:
                failpoint(f"{KIND}.mid-apply")
        plans = _plans(core, chosen, pod_rules, protected)  # again: pods scheduled meanwhile
        settings = EvictionSettings(
            deadline=t0 + timeout_seconds,
            backoff_initial_seconds=backoff_initial_seconds,
            backoff_max_seconds=backoff_max_seconds,
            parallel=parallel,
            force=force,
            wait_for_deletion=wait_for_deletion,
            grace_period_seconds=grace_period_seconds if grace_period_seconds >= 0 else None,
        )
        evict = plan.interleave([p.pod for p in plans if p.action == "evict"])
        outcomes = evict_pods(core, evict, settings)
        report = _report(chosen, plans, outcomes, entry, t0)
        _fail_if_blocked(names, outcomes, timeout_seconds)
    if uncordon_after_seconds > 0:
        undo_after(entry, uncordon_after_seconds)
    return report


def _undo_drain(entry: Entry) -> str:
    """Uncordon the nodes that still carry this drain's mark, as they were; leave the others."""
    core = client.CoreV1Api(undo_api_client(entry.identity))
    before = entry.recipe.get("unschedulable") or {}
    notes = []
    for number, name in enumerate(entry.recipe["nodes"]):
        try:
            node = read_json(core.read_node, name, what=f"read node {name}")
        except KubernetesError as exc:
            if status_of(exc.__cause__) == 404:
                notes.append(f"{name}: gone")
                continue
            raise
        marks = (node.get("metadata") or {}).get("annotations") or {}
        if marks.get(plan.CORDON_ANNOTATION) != entry.id:
            notes.append(f"{name}: not cordoned by this drain, left as is")
            continue
        previous = before.get(name)  # None: the field was absent, so it is removed
        patch = {
            "spec": {"unschedulable": previous},
            "metadata": {"annotations": {plan.CORDON_ANNOTATION: None}},
        }
        call(core.patch_node, name, patch, what=f"uncordon node {name}", _preload_content=False)
        notes.append(f"{name}: uncordoned")
        if number == 0:
            failpoint(f"{KIND}.mid-undo")
    return "; ".join(notes)


@rollback_activity
@needs_k8s(Rule("", "nodes", ("get", "patch"), cluster_scoped=True), IDENTITY_RULE)
@validated_by()
def uncordon_drained_nodes(
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Uncordon the nodes that `drain_nodes` cordoned (its rollback; use it in "rollbacks").

    Blast radius: only nodes that still carry a drain's mark, from this run's
    open drains; `include_dead_runs` adds drains left open by runs whose
    runner is dead. A live run's drains are never touched (listed under
    `left_alone`), nor nodes cordoned by anyone else. Idempotent. Raises
    RollbackFailed if a node could not be uncordoned (the entry stays open
    for `gameday rollback`).
    """
    book = default_ledger()
    entries = [e for e in book.open_entries() if e.kind == KIND]
    return roll_back(entries, book, include_dead_runs=include_dead_runs)
