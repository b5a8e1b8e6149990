"""Steady-state summaries of nodes, pending pods, Deployments and HPAs (pure functions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from chaos_ext._core.k8s import parse_time

__all__ = ["condition", "hpa_summary", "node_summary", "pending_summary", "ready_ratio"]

Manifest = Mapping[str, Any]


def condition(obj: Manifest, kind: str) -> Mapping[str, Any] | None:
    """The status condition of type ``kind``, if any."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def _is_true(obj: Manifest, kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def node_summary(nodes: Sequence[Manifest]) -> dict[str, Any]:
    """Counts of Ready / not Ready / cordoned nodes and their names."""
    names = [str((n.get("metadata") or {}).get("name", "")) for n in nodes]
    ready = [name for name, n in zip(names, nodes, strict=True) if _is_true(n, "Ready")]
    cordoned = [
        name
        for name, n in zip(names, nodes, strict=True)
        if (n.get("spec") or {}).get("unschedulable")
    ]
    not_ready = sorted(set(names) - set(ready))
    return {
        "total": len(nodes),
        "ready": len(ready),
        "not_ready": not_ready,
        "cordoned": sorted(cordoned),
        "all_ready": not not_ready,
        "all_ready_and_schedulable": not not_ready and not cordoned,
    }


def pending_summary(
    pods: Sequence[Manifest], *, now: datetime | None = None, min_age_seconds: float = 0
) -> dict[str, Any]:
    """Pending pods (older than ``min_age_seconds``), and those the scheduler cannot place."""
    now = now or datetime.now(UTC)
    found = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Pending":
            continue
        meta = pod.get("metadata") or {}
        since = parse_time(meta.get("creationTimestamp"))
        age = (now - since).total_seconds() if since else 0.0
        if age < min_age_seconds:
            continue
        scheduled = condition(pod, "PodScheduled") or {}
        unschedulable = (
            scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable"
        )
        found.append(
            {
                "namespace": meta.get("namespace", ""),
                "name": meta.get("name", ""),
                "age_seconds": round(age, 1),
                "unschedulable": unschedulable,
                "message": scheduled.get("message", "") if unschedulable else "",
            }
        )
    return {
        "pending": len(found),
        "unschedulable": sum(1 for p in found if p["unschedulable"]),
        "pods": found[:20],
    }


def ready_ratio(deployment: Manifest) -> float:
    """Ready replicas / desired replicas (1.0 for a Deployment scaled to zero)."""
    desired = int((deployment.get("spec") or {}).get("replicas", 1))
    if desired <= 0:
        return 1.0
    ready = int((deployment.get("status") or {}).get("readyReplicas") or 0)
    return min(ready, desired) / desired


def hpa_summary(hpa: Manifest) -> dict[str, Any]:
    """Current vs desired replicas of an HPA and whether it is stuck.

    Stuck: it cannot scale (``AbleToScale`` False) or has no usable metric
    (``ScalingActive`` False), so it would not react to load.
    """
    spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
    current = int(status.get("currentReplicas") or 0)
    desired = int(status.get("desiredReplicas") or 0)
    able = _is_true(hpa, "AbleToScale")
    active = _is_true(hpa, "ScalingActive")
    limited = _is_true(hpa, "ScalingLimited")
    reasons = [
        f"{c['type']}={c.get('status')} ({c.get('reason', '')})"
        for c in (status.get("conditions") or [])
        if (c.get("type") in ("AbleToScale", "ScalingActive") and c.get("status") != "True")
    ]
    return {
        "current": current,
        "desired": desired,
        "min": int(spec.get("minReplicas") or 1),
        "max": int(spec.get("maxReplicas") or 0),
        "converged": current == desired,
        "able_to_scale": able,
        "scaling_active": active,
        "scaling_limited": limited,
        "at_max": current >= int(spec.get("maxReplicas") or 0) > 0,
        "stuck": not able or not active,
        "why": reasons,
    }
