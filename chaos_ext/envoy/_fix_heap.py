"""The overload manager's heap, sized from the pod: the audit rule and the fix. Pure.

The profiles' fixes carry the example's 2 GiB ``max_heap_size_bytes``. A heap
limit at or above the container's memory limit never protects anything: the
kernel OOM-kills Envoy before ``shrink_heap`` (95 %) or
``stop_accepting_requests`` (98 %) can fire. So:

* :func:`heap_rule` is an extra audit rule, added when the memory limit is
  known: the fixed_heap limit must be below it; its fix writes
  :func:`._gateway.heap_for` of it (the headroom of :data:`._gateway.HEAP_FRACTION`);
* :func:`size_heap` rewrites the plan's heap to that size, or, when no limit
  is known, takes the heap monitor (and the actions that would trigger on a
  monitor that is not there) out of the plan and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaos_ext.envoy._fix import FixPlan
from chaos_ext.envoy._gateway import HEAP_FRACTION, GatewayFacts, heap_for
from chaos_ext.envoy._rules import Location, Rule

__all__ = ["FIXED_HEAP", "HEAP_RULE", "heap_rule", "size_heap"]

FIXED_HEAP = "envoy.resource_monitors.fixed_heap"
HEAP_RULE = "overload-heap-below-memory-limit"
_HEAP_RULES = (
    "overload-fixed-heap",
    "overload-shrink-heap",
    "overload-stop-accepting-requests",
    HEAP_RULE,
)
_MONITOR = f'overload_manager.resource_monitors[?name = "{FIXED_HEAP}"]'
_TYPE = "type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig"


def heap_rule(limit_bytes: int, limit_from: str) -> Rule:
    """The rule that fails a fixed_heap limit at or above the container's headroom."""
    heap = heap_for(limit_bytes)
    fix = {
        "bootstrap": {
            "overload_manager": {
                "resource_monitors": [
                    {
                        "name": FIXED_HEAP,
                        "typed_config": {"@type": _TYPE, "max_heap_size_bytes": heap},
                    }
                ]
            }
        }
    }
    return Rule(
        id=HEAP_RULE,
        title=f"the fixed_heap limit is below the container's memory limit ({limit_from}; "
        f"the fix writes {HEAP_FRACTION:.0%} of it)",
        at=(
            Location("bootstrap", f"{_MONITOR}.typed_config.max_heap_size_bytes"),
            Location("bootstrap", f"{_MONITOR}.config.max_heap_size_bytes"),
        ),
        op="<",
        value=limit_bytes,
        severity="critical",
        when_absent="pass",
        envoy_default="no heap monitor (overload-fixed-heap fails it)",
        why="a heap limit at or above the memory limit lets the kernel OOM-kill Envoy before "
        "shrink_heap or stop_accepting_requests fire",
        source={
            "doc": "Envoy Gateway: Overload Manager (the heap at 80 % of the container's "
            "memory limit, for headroom outside the heap)",
            "url": "https://gateway.envoyproxy.io/docs/tasks/operations/overload-manager/",
        },
        fix=fix,
    )


def _monitors(bootstrap: Mapping[str, Any]) -> list[dict[str, Any]]:
    monitors = (bootstrap.get("overload_manager") or {}).get("resource_monitors") or []
    return [m for m in monitors if isinstance(m, dict) and m.get("name") == FIXED_HEAP]


def _drop_heap(plan: FixPlan, base: Mapping[str, Any]) -> None:
    overload = plan.bootstrap.get("overload_manager") or {}
    monitors = overload.get("resource_monitors") or []
    overload["resource_monitors"] = [m for m in monitors if m.get("name") != FIXED_HEAP]
    if not _monitors(base):  # Envoy refuses an action triggered by a monitor it does not have
        actions = overload.get("actions") or []
        overload["actions"] = [
            a
            for a in actions
            if not any(t.get("name") == FIXED_HEAP for t in a.get("triggers") or [])
        ]
    for key in ("resource_monitors", "actions"):
        if not overload.get(key):
            overload.pop(key, None)
    if set(overload) <= {"refresh_interval"}:
        plan.bootstrap.pop("overload_manager", None)


def size_heap(plan: FixPlan, base: Mapping[str, Any], facts: GatewayFacts) -> list[str]:
    """Size the plan's heap from ``facts`` (in place); what was done, in words."""
    wanted = _monitors(plan.bootstrap)
    if not wanted:
        return []
    if facts.memory_limit_bytes is None:
        _drop_heap(plan, base)
        dropped = _HEAP_RULES if not _monitors(base) else ("overload-fixed-heap", HEAP_RULE)
        plan.rules[:] = [rule for rule in plan.rules if rule not in dropped]
        if _monitors(base):
            return []
        why = "; ".join(facts.notes) or "no Deployment was read and no --memory-limit given"
        plan.manual.append(
            (
                "overload-fixed-heap",
                "no heap limit written: the container's "
                f"memory limit is not known ({why}); give --memory-limit "
                "(the istio-proxy container's limits.memory), --existing "
                "deployment.yaml or --deployment NAMESPACE/NAME",
            )
        )
        return []
    heap = heap_for(facts.memory_limit_bytes)
    for monitor in wanted:
        config = monitor.setdefault("typed_config", {"@type": _TYPE})
        config["max_heap_size_bytes"] = heap
    return [
        f"heap limit {heap} bytes: {HEAP_FRACTION:.0%} of the container's memory limit "
        f"{facts.memory_limit_bytes} bytes ({facts.memory_limit_from})"
    ]
