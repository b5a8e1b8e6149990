"""Write a fix to a directory, with a README that says how to apply it and check it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaos_ext.envoy._fix import build_plan
from chaos_ext.envoy._fix_envoy import FixFiles, envoy_fix
from chaos_ext.envoy._fix_istio import istio_fix
from chaos_ext.envoy._gateway import GatewayFacts
from chaos_ext.envoy._pipeline import AuditRun
from chaos_ext.envoy.errors import EnvoyError
from chaos_ext.errors import InvalidArgument

__all__ = ["FIX_KINDS", "fixed_rules", "write_fix"]

FIX_KINDS = ("istio", "envoy")


def _open(report: Mapping[str, Any]) -> set[str]:
    return {
        row["rule"] for row in report["results"] if row["status"] in ("fail", "unreadable", "warn")
    }


def fixed_rules(run: AuditRun, out: FixFiles) -> list[str]:
    """The rules that fail (or warn) on the input and pass once the written files are applied."""
    before = _open(run.report)
    after = [_open(report) for report in out.rechecks.values()]
    return sorted(before - min(after, key=len)) if after else []


def _reaudit(kind: str, run: AuditRun, out: FixFiles, facts: GatewayFacts) -> str:
    limit = ""
    if facts.memory_limit_from.startswith("--memory-limit"):
        limit = f" {facts.memory_limit_from}"
    elif facts.memory_limit_bytes is not None and facts.deployment:
        limit = f" --deployment {facts.deployment}"  # the heap rule, with the live limit
    if kind == "envoy":
        return (
            f"gameday audit envoy --source http://127.0.0.1:9901 --profile "
            f"{run.profile.name}{limit}"
        )
    namespace = run.role.namespace or "istio-system"
    pairs = ",".join(f"{k}={v}" for k, v in (out.selector or {}).items())
    where = f"pod://{namespace}?selector={pairs}" if pairs else f"pod://{namespace}/POD"
    return f"gameday audit envoy --source '{where}' --profile {run.profile.name}{limit}"


def _readme(kind: str, run: AuditRun, out: FixFiles, facts: GatewayFacts) -> str:
    fixed = fixed_rules(run, out)
    lines = [
        f"# Fix written by `gameday audit envoy --fix {kind}`",
        "",
        f"Audited: {run.origin} ({run.report['input']['description']}, "
        f"{run.role.role}, profile {run.profile.name}).",
        "",
        "Rules that pass once these files are applied (re-audited before writing): "
        f"{', '.join(fixed) or 'none'}.",
        "",
        "## Files",
        "",
    ]
    lines += [f"- `{name}`" for name in sorted(out.files)] or ["- none"]
    lines += ["", "## Checked before writing", ""] + [f"- {line}" for line in out.lines]
    if out.caveats:
        lines += ["", "## Not done, or to check first", ""]
        lines += [f"- {line}" for line in out.caveats]
    if out.review:
        lines += ["", "## Warnings to review by hand (no fix is written for them)", ""]
        lines += [f"- {line}" for line in out.review]
    if out.warnings:
        lines += ["", "## What this changes for users", ""]
        lines += [f"- {line}" for line in out.warnings]
    if out.apply:
        lines += [
            "",
            "## Apply, then re-audit",
            "",
            "```sh",
            *out.apply,
            _reaudit(kind, run, out, facts),
            "```",
        ]
    return "\n".join(lines) + "\n"


def write_fix(
    run: AuditRun, kind: str, directory: str, facts: GatewayFacts | None = None
) -> FixFiles:
    """Plan, render, re-audit and write the fix; the files and what was checked."""
    if kind not in FIX_KINDS:
        raise InvalidArgument(f"fix: {kind!r} is not one of {', '.join(FIX_KINDS)}")
    if kind == "istio" and run.role.role != "gateway":
        raise EnvoyError(
            f"{run.origin}: --fix istio writes manifests for an Istio gateway, but this proxy "
            f"is {run.role.role} ({run.role.evidence}); use --fix envoy, or --role gateway"
        )
    plan = build_plan(run)
    facts = facts or GatewayFacts()
    out = istio_fix(run, plan, facts) if kind == "istio" else envoy_fix(run, plan, facts)
    out.review += [f"{rule}: {why}" for rule, why in plan.review]
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name, text in out.files.items():
            (target / name).write_text(text, encoding="utf-8")
        (target / "README.md").write_text(_readme(kind, run, out, facts), encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"output directory {directory!r}: {exc.strerror or exc}") from None
    out.files["README.md"] = (target / "README.md").read_text(encoding="utf-8")
    return out
