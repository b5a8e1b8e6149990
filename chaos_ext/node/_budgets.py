"""Which PodDisruptionBudgets allow or block each eviction of a drain (pure functions).

The Eviction API refuses (HTTP 429) an eviction that would take a budget
below its ``disruptionsAllowed``; a budget whose allowance is used up by the
drain's earlier evictions makes the next pod wait for a replacement to be
Ready, and a budget that allows nothing at all blocks it until the drain's
timeout (or, with ``force``, until it deletes the pod past the budget).
``disruptionsAllowed`` is read from the budget's status, as the API server
does; a budget without a status yet is computed from its spec and the pods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Budget", "budget_of", "judge_evictions", "selector_matches"]


def _expression_holds(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False  # an unknown operator selects nothing (the API server rejects it anyway)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A label selector against a pod's labels (policy/v1: an empty selector selects all)."""
    if selector is None:
        return False
    wanted = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    return all(_expression_holds(e, labels) for e in selector.get("matchExpressions") or [])


@dataclass(frozen=True)
class Budget:
    """A budget as the drain meets it."""

    namespace: str
    name: str
    selector: Mapping[str, Any] | None
    allowed: int
    source: str  # "status" or "computed"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _scaled(value: int | str, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = float(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def budget_of(pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Budget:
    """The budget, its allowance from its status (or computed from ``pods`` of its namespace)."""
    meta, spec = pdb.get("metadata") or {}, pdb.get("spec") or {}
    selector = spec.get("selector")
    status = pdb.get("status") or {}
    if status.get("disruptionsAllowed") is not None:
        allowed, source = int(status["disruptionsAllowed"]), "status"
    else:
        chosen = [
            p
            for p in pods
            if selector_matches(selector, _labels(p))
            and not (p.get("metadata") or {}).get("deletionTimestamp")
        ]
        healthy = sum(1 for p in chosen if _is_ready(p))
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], len(chosen), round_up=True)
        elif spec.get("maxUnavailable") is not None:
            desired = len(chosen) - _scaled(spec["maxUnavailable"], len(chosen), round_up=True)
        else:
            desired = len(chosen)
        allowed, source = max(0, healthy - desired), "computed"
    return Budget(
        str(meta.get("namespace", "")), str(meta.get("name", "")), selector, allowed, source
    )


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def judge_evictions(
    pods: Sequence[Mapping[str, Any]], budgets: Sequence[Budget]
) -> list[dict[str, Any]]:
    """For each pod to evict (in eviction order): its budgets and whether they let it go.

    ``verdict``: ``allowed`` (within every budget now), ``waits`` (a budget's
    allowance is used by earlier evictions of this drain: it goes once a
    replacement is Ready) or ``blocked`` (a budget allows no disruption at
    all; ``blocking`` names it).
    """
    left = {b.key: b.allowed for b in budgets}
    judged = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        mine = [
            b
            for b in budgets
            if b.namespace == meta.get("namespace") and selector_matches(b.selector, _labels(pod))
        ]
        blocking = [b.key for b in mine if b.allowed <= 0]
        waiting = [b.key for b in mine if b.allowed > 0 and left[b.key] <= 0]
        for b in mine:
            left[b.key] -= 1
        verdict = "blocked" if blocking else "waits" if waiting else "allowed"
        judged.append(
            {
                "pod": f"{meta.get('namespace')}/{meta.get('name')}",
                "node": (pod.get("spec") or {}).get("nodeName", ""),
                "budgets": [
                    {"pdb": b.key, "disruptions_allowed": b.allowed, "from": b.source} for b in mine
                ],
                "verdict": verdict,
                "blocking": blocking,
                "waits_on": waiting,
            }
        )
    return judged
