"""The JSON report of an audit: what was read, what was checked, what failed. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from chaos_ext.envoy._audit import FAILING, Check
from chaos_ext.envoy._dump import EdgeConfig, Listener
from chaos_ext.envoy._role import Role

__all__ = ["audit_report", "describe_input"]


def _admin_api(data: Mapping[str, Any]) -> str:
    versions = sorted(
        {
            str(entry.get("@type", "")).rsplit(".", 2)[-2]
            for entry in data.get("configs") or []
            if isinstance(entry, dict) and str(entry.get("@type", "")).count(".") >= 2
        }
    )
    return ", ".join(f"envoy.admin.{v}" for v in versions) or "no typed entries"


def describe_input(config: EdgeConfig, data: Mapping[str, Any], syntax: str) -> dict[str, Any]:
    """What was read: the kind, in words, and what was unusual about it."""
    notes = list(config.notes)
    older = sum(1 for item in config.listeners for hcm in item.hcms if hcm.path.endswith(".config"))
    if older:
        notes.append(f"{older} HTTP connection manager(s) in the older 'config' form, read")
    unnamed = [item.label for item in config.listeners if item.name is None]
    if unnamed:
        notes.append(f"{len(unnamed)} listener(s) without a name: {', '.join(unnamed[:5])}")
    states = Counter(item.state for item in config.listeners if item.dynamic)
    if states.get("warming") or states.get("draining"):
        notes.append(
            f"dynamic listeners by state: {dict(sorted(states.items()))} "
            "(draining ones are not audited)"
        )
    if config.kind == "config_dump":
        text = f"Envoy /config_dump ({_admin_api(data)})"
    else:
        text = f"Envoy bootstrap ({syntax})"
        if config.listeners_from_lds:
            notes.append("listeners come from LDS: listener rules need the live /config_dump")
    return {"kind": config.kind, "syntax": syntax, "description": text, "notes": notes}


def audit_report(
    checks: Sequence[Check],
    *,
    source: str,
    listeners: Sequence[Listener],
    profile: str,
    role: Role,
    input_info: Mapping[str, Any],
) -> dict[str, Any]:
    """The JSON-friendly result of an audit (what the probe returns)."""
    statuses = Counter(c.status for c in checks)
    failed_rules = sorted({c.rule.id for c in checks if c.status in FAILING})
    return {
        "source": source,
        "input": dict(input_info),
        "proxy": {"role": role.role, "evidence": role.evidence},
        "profile": profile,
        "listeners": [item.label for item in listeners],
        "passed": not failed_rules,
        "summary": {
            "rules": len({c.rule.id for c in checks}),
            "checks": len(checks),
            "passed": statuses["pass"],
            "failed": statuses["fail"],
            "unreadable": statuses["unreadable"],
            "warnings": statuses["warn"],
            "not_in_input": statuses["not-in-input"],
            "failed_rules": failed_rules,
        },
        "results": [c.as_dict() for c in checks],
    }
