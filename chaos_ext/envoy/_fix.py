"""What to change so that every failing rule passes: a fix plan from an audit. Pure.

Each rule carries its ``fix`` as data (``hcm``/``listener``/``cluster`` fields,
``bootstrap`` fields, ``runtime`` keys, ``{listener}`` standing for the
listener's name). The plan gathers the fixes of the failing checks per target,
so that the writers (:mod:`._fix_envoy`, :mod:`._fix_istio`) only render them.
A failing check whose rule has no fix, or whose value could not be read, is
listed as manual work (with the rule's ``by_hand`` advice and the check's note,
e.g. the routes that fail), never silently dropped; a warning whose rule has no
fix is listed for review (it does not fail the audit, so the fix stays
complete without it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chaos_ext.envoy._audit import FAILING, Check, cluster_statuses
from chaos_ext.envoy._dump import Listener, Section
from chaos_ext.envoy._merge import upsert
from chaos_ext.envoy._pipeline import AuditRun
from chaos_ext.envoy._rules import LISTENER_PLACEHOLDER

__all__ = ["FixPlan", "HcmFix", "build_plan", "listener_port"]

_ORPHAN = re.compile(r"but no listener is named '([^']+)'")


@dataclass(frozen=True)
class HcmFix:
    """Fields to set on one HTTP connection manager of one listener."""

    listener: Listener
    hcm: Section
    fields: dict[str, Any]


@dataclass
class FixPlan:
    """Every change the failing checks ask for, per target."""

    bootstrap: dict[str, Any] = field(default_factory=dict)
    runtime: dict[str, Any] = field(default_factory=dict)
    listeners: dict[str, tuple[Listener, dict[str, Any]]] = field(default_factory=dict)
    hcms: dict[str, HcmFix] = field(default_factory=dict)
    cluster_fields: dict[str, Any] = field(default_factory=dict)
    clusters: list[Section] = field(default_factory=list)  # the failing ones
    all_clusters_fail: bool = False
    names: dict[str, tuple[Listener, str]] = field(default_factory=dict)
    manual: list[tuple[str, str]] = field(default_factory=list)  # (rule id, why)
    review: list[tuple[str, str]] = field(default_factory=list)  # warnings without a fix
    rules: list[str] = field(default_factory=list)  # rule ids the plan addresses

    @property
    def empty(self) -> bool:
        return not (
            self.bootstrap
            or self.runtime
            or self.listeners
            or self.hcms
            or self.clusters
            or self.names
        )


def listener_port(listener: Listener) -> int | None:
    """The listener's port (from ``address.socket_address.port_value``)."""
    address = (listener.section.value.get("address") or {}).get("socket_address") or {}
    port = address.get("port_value")
    return int(port) if isinstance(port, int | str) and str(port).isdigit() else None


def _name_for(check: Check, listener: Listener) -> str:
    orphan = _ORPHAN.search(check.note)
    if orphan:
        return orphan.group(1)
    port = listener_port(listener)
    return f"listener_{port}" if port is not None else "edge_listener"


def _runtime(plan: FixPlan, fix: dict[str, Any], name: str) -> None:
    for key, value in (fix.get("runtime") or {}).items():
        plan.runtime[str(key).replace(LISTENER_PLACEHOLDER, name)] = value


def _failing_clusters(check: Check, run: AuditRun) -> list[Section]:
    pairs = cluster_statuses(check.rule, run.config)
    return [cluster for cluster, status in pairs if status == "fail"]


def _add(plan: FixPlan, check: Check, run: AuditRun) -> None:
    fix: dict[str, Any] = check.rule.fix or {}
    listener = check.target
    if check.status == "unreadable":
        plan.manual.append((check.rule.id, f"unreadable at {check.path}: {check.note}"))
        return
    if not fix:
        why = check.rule.by_hand or "the rule has no fix: change it by hand"
        if check.rule.granularity == "route" and check.detail:
            names = check.detail["failing"]
            more = " ..." if len(names) < check.detail["failed"] else ""
            why = f"{why}; {check.detail['failed']} route(s): {'; '.join(names)}{more}"
        (plan.review if check.status == "warn" else plan.manual).append((check.rule.id, why))
        return
    if listener is not None and listener.name is None and check.path.endswith(".name"):
        name = _name_for(check, listener)
        plan.names[listener.label] = (listener, name)
        if not _ORPHAN.search(check.note):
            _runtime(plan, fix, name)
    elif check.rule.granularity == "cluster":
        plan.cluster_fields = upsert(plan.cluster_fields, fix.get("cluster") or {})
        plan.clusters = _failing_clusters(check, run)
        plan.all_clusters_fail = len(plan.clusters) == len(run.config.clusters)
    else:
        plan.bootstrap = upsert(plan.bootstrap, fix.get("bootstrap") or {})
        _runtime(plan, fix, (listener.name or "") if listener else "")
        if listener is not None and fix.get("listener"):
            old = plan.listeners.get(listener.label, (listener, {}))[1]
            plan.listeners[listener.label] = (listener, upsert(old, fix["listener"]))
        if listener is not None and fix.get("hcm"):
            hcm = next(h for h in listener.hcms if check.path.startswith(h.path))
            old_fix = plan.hcms.get(hcm.path)
            fields = upsert(old_fix.fields if old_fix else {}, fix["hcm"])
            plan.hcms[hcm.path] = HcmFix(listener, hcm, fields)
    if check.rule.id not in plan.rules:
        plan.rules.append(check.rule.id)


def build_plan(run: AuditRun) -> FixPlan:
    """The fixes for every failing check (and every unnamed-listener warning) of ``run``."""
    plan = FixPlan()
    for check in run.checks:
        if check.status in FAILING or check.status == "warn":
            _add(plan, check, run)
    return plan
