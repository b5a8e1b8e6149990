"""What a drain would do, decided without touching the cluster (pure functions).

The activity fetches nodes and pods, and this module decides: which nodes to
drain (:func:`choose_nodes`), whether that is within the blast radius
(:func:`check_blast_radius`), and what happens to each pod on them
(:func:`plan_pods`), following ``kubectl drain``'s rules:

* DaemonSet-managed pods and mirror (static) pods are skipped: their
  controller would put them straight back / they are not API-managed;
* pods already terminating are skipped;
* finished pods (Succeeded/Failed) are evicted (the API does not check
  budgets for them);
* pods with ``emptyDir`` volumes need ``delete_emptydir_data`` (the data is lost);
* bare pods (no controller) need ``force`` (nothing recreates them).

Any pod that needs a flag that was not given makes the whole drain refuse
*before* anything changes, with the list of such pods.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from chaos_ext.errors import PreflightFailed

__all__ = [
    "CORDON_ANNOTATION",
    "NodeInfo",
    "PodInfo",
    "PodPlan",
    "backoff_delays",
    "check_blast_radius",
    "check_protected",
    "choose_nodes",
    "interleave",
    "plan_pods",
    "refusals",
    "wanted_count",
]

CORDON_ANNOTATION = "chaos-ext.gameday/cordoned-by"
"""Set on a node in the same PATCH that cordons it; its value is the ledger entry id.

The undo uncordons a node only if it still carries this drain's entry id, so
a node that was already cordoned (or cordoned by someone else) is left alone.
"""

Action = Literal["evict", "skip", "refuse"]
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclass(frozen=True)
class NodeInfo:
    """What the drain needs to know about a node."""

    name: str
    ready: bool
    unschedulable: bool
    cordoned_by: str | None = None
    unschedulable_field: bool | None = None  # spec.unschedulable as written; None: absent

    @classmethod
    def from_manifest(cls, node: Mapping[str, Any]) -> NodeInfo:
        meta = node.get("metadata") or {}
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return cls(
            name=str(meta.get("name", "")),
            ready=ready,
            unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            cordoned_by=(meta.get("annotations") or {}).get(CORDON_ANNOTATION),
            unschedulable_field=(node.get("spec") or {}).get("unschedulable"),
        )


@dataclass(frozen=True)
class PodInfo:
    """What the drain needs to know about a pod."""

    namespace: str
    name: str
    uid: str
    node: str
    phase: str
    controller: str | None  # "ReplicaSet/web-7d9f", None for a bare pod
    mirror: bool
    terminating: bool
    emptydir_volumes: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_manifest(cls, pod: Mapping[str, Any]) -> PodInfo:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            node=str(spec.get("nodeName", "")),
            phase=str((pod.get("status") or {}).get("phase", "")),
            controller=f"{owners[0]['kind']}/{owners[0]['name']}" if owners else None,
            mirror=MIRROR_ANNOTATION in (meta.get("annotations") or {}),
            terminating=bool(meta.get("deletionTimestamp")),
            emptydir_volumes=tuple(
                str(v.get("name")) for v in spec.get("volumes") or [] if "emptyDir" in v
            ),
        )


@dataclass(frozen=True)
class PodPlan:
    """The decision for one pod and why."""

    pod: PodInfo
    action: Action
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.pod.namespace,
            "name": self.pod.name,
            "node": self.pod.node,
            "action": self.action,
            "reason": self.reason,
        }


def choose_nodes(
    nodes: Sequence[NodeInfo], *, count: int, percent: float, pick: str, seed: int | None = None
) -> list[NodeInfo]:
    """The nodes to drain among the Ready, schedulable ones.

    ``count`` nodes, or ``percent`` of the Ready matching nodes (rounded down,
    at least one); ``pick`` is ``"first"`` (by name) or ``"random"``.
    """
    candidates = sorted((n for n in nodes if n.ready and not n.unschedulable), key=lambda n: n.name)
    wanted = wanted_count(nodes, count=count, percent=percent)
    if pick == "random":
        candidates = random.Random(seed).sample(candidates, len(candidates))  # noqa: S311 - not crypto
    return candidates[:wanted]


def wanted_count(nodes: Sequence[NodeInfo], *, count: int, percent: float) -> int:
    """``count``, or ``percent`` of the Ready nodes rounded down (at least one)."""
    if count > 0:
        return count
    ready = sum(1 for n in nodes if n.ready)
    return max(1, math.floor(percent * ready / 100 + 1e-9))


def check_blast_radius(
    nodes: Sequence[NodeInfo],
    chosen: Sequence[NodeInfo],
    *,
    max_fraction: float,
    selector: str,
    wanted: int,
) -> None:
    """Refuse (PreflightFailed) a drain that would disrupt too many Ready nodes.

    Nodes already cordoned count as disrupted. At most ``floor(max_fraction x
    Ready matching nodes)`` may be disrupted, and never all of them.
    """
    ready = [n for n in nodes if n.ready]
    already = [n for n in ready if n.unschedulable]
    if not chosen or len(chosen) < wanted:
        raise PreflightFailed(
            f"drain: {wanted} node(s) wanted but only {len(chosen)} Ready, schedulable node(s)"
            f" match {selector!r} ({len(ready)} Ready, {len(already)} already cordoned)."
            " Nothing was changed"
        )
    disrupted = len(chosen) + len(already)
    allowed = math.floor(max_fraction * len(ready) + 1e-9)
    if disrupted >= len(ready):
        raise PreflightFailed(
            f"drain: refusing to drain {len(chosen)} node(s): with {len(already)} already cordoned"
            f" that is every Ready node matching {selector!r} ({len(ready)}). Nothing was changed"
        )
    if disrupted > allowed:
        raise PreflightFailed(
            f"drain: refusing to drain {len(chosen)} of {len(ready)} Ready node(s) matching"
            f" {selector!r} ({len(already)} already cordoned): max_fraction={max_fraction:g}"
            f" allows at most {allowed} disrupted; lower count/percent or raise max_fraction."
            " Nothing was changed"
        )


def plan_pods(pods: Sequence[PodInfo], *, delete_emptydir_data: bool, force: bool) -> list[PodPlan]:
    """Decide, per pod, evict / skip / refuse (see the module docstring)."""
    return [_plan_one(p, delete_emptydir_data=delete_emptydir_data, force=force) for p in pods]


def _plan_one(pod: PodInfo, *, delete_emptydir_data: bool, force: bool) -> PodPlan:  # noqa: PLR0911
    if pod.mirror:
        return PodPlan(pod, "skip", "mirror pod (static pod managed by the kubelet)")
    if pod.controller and pod.controller.startswith("DaemonSet/"):
        return PodPlan(pod, "skip", f"DaemonSet-managed ({pod.controller})")
    if pod.terminating:
        return PodPlan(pod, "skip", "already terminating")
    if pod.phase in ("Succeeded", "Failed"):
        return PodPlan(pod, "evict", f"finished ({pod.phase})")
    if pod.emptydir_volumes and not delete_emptydir_data:
        volumes = ", ".join(pod.emptydir_volumes)
        return PodPlan(
            pod, "refuse", f"uses emptyDir ({volumes}): pass delete_emptydir_data=true to lose it"
        )
    if pod.controller is None:
        if not force:
            return PodPlan(
                pod, "refuse", "bare pod (no controller): pass force=true; it will not come back"
            )
        return PodPlan(pod, "evict", "bare pod, forced: it will not be recreated")
    lost = " (emptyDir data will be lost)" if pod.emptydir_volumes else ""
    return PodPlan(pod, "evict", f"managed by {pod.controller}{lost}")


def interleave(pods: Sequence[PodInfo]) -> list[PodInfo]:
    """Order pods round-robin across their controllers.

    Pods of one controller usually share a PodDisruptionBudget; evicting them
    back to back would have every worker wait on the same budget while other
    budgets have room. Round-robin keeps the workers on different budgets.
    """
    groups: dict[str, list[PodInfo]] = {}
    for pod in pods:
        groups.setdefault(f"{pod.namespace}/{pod.controller or pod.name}", []).append(pod)
    ordered: list[PodInfo] = []
    queues = list(groups.values())
    while queues:
        ordered += [q.pop(0) for q in queues]
        queues = [q for q in queues if q]
    return ordered


def refusals(plans: Sequence[PodPlan]) -> None:
    """Raise PreflightFailed listing every pod that blocks the drain."""
    blocked = [p for p in plans if p.action == "refuse"]
    if blocked:
        shown = "; ".join(f"{p.pod.key} on {p.pod.node}: {p.reason}" for p in blocked[:10])
        more = f" (and {len(blocked) - 10} more)" if len(blocked) > 10 else ""
        raise PreflightFailed(
            f"drain: {len(blocked)} pod(s) cannot be drained: {shown}{more}. Nothing was changed"
        )


def check_protected(plans: Sequence[PodPlan], protected_namespaces: Sequence[str]) -> None:
    """Refuse a drain that would evict pods of a protected namespace."""
    protected = set(protected_namespaces)
    hit = [p for p in plans if p.action == "evict" and p.pod.namespace in protected]
    if hit:
        nodes = sorted({p.pod.node for p in hit})
        shown = ", ".join(p.pod.key for p in hit[:10])
        raise PreflightFailed(
            f"drain: node(s) {', '.join(nodes)} run pods of protected namespaces ({shown});"
            " choose other nodes or change protected_namespaces. Nothing was changed"
        )


def backoff_delays(
    initial: float,
    maximum: float,
    *,
    factor: float = 2.0,
    jitter: float = 0.2,
    rng: random.Random | None = None,
) -> Iterator[float]:
    """Exponential backoff with +/- ``jitter`` (a fraction), capped at ``maximum``."""
    rng = rng or random.Random()  # noqa: S311 - spreading retries, not crypto
    delay = initial
    while True:
        yield min(maximum, delay) * (1 + rng.uniform(-jitter, jitter))
        delay = min(maximum, delay * factor)
