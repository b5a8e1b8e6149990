"""``--fix envoy``: a bootstrap overlay, and the bootstrap patched in place. Pure.

Envoy merges ``--config-yaml`` into its bootstrap with protobuf ``MergeFrom``
(:mod:`._merge`): new overload-manager monitors and actions and a new runtime
layer merge cleanly, but repeated fields are *appended*, so an overlay cannot
change an existing listener, filter chain, cluster, monitor or action (Envoy
would refuse the duplicate name). Those fixes go into the patched bootstrap
(for a bootstrap input) or are listed as manual work (listeners and clusters
a control plane delivers). Both results are re-audited before they are
written, and the report says what still fails.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from chaos_ext.envoy._apply import with_overlay
from chaos_ext.envoy._audit import Check
from chaos_ext.envoy._fix import FixPlan
from chaos_ext.envoy._fix_heap import size_heap
from chaos_ext.envoy._gateway import GatewayFacts
from chaos_ext.envoy._input import Decoded
from chaos_ext.envoy._merge import path_tokens, set_path, split_duplicates, upsert
from chaos_ext.envoy._pipeline import AuditRun

__all__ = [
    "RUNTIME_LAYER",
    "FixFiles",
    "envoy_fix",
    "overlay_for",
    "render_yaml",
    "timeout_warnings",
]

RUNTIME_LAYER = "gameday-edge-fixes"


@dataclass
class FixFiles:
    """Files to write, what each one covers, and the re-audits of the fixed result.

    ``caveats``: what the fix leaves undone or could not check (the fix is then
    incomplete: exit 2); ``apply``: the commands that apply exactly the files
    written; ``warnings``: behaviour the fix changes for users; ``review``:
    warnings of rules without a fix, to look at by hand (they do not make the
    fix incomplete).
    """

    files: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    rechecks: dict[str, dict[str, Any]] = field(default_factory=dict)
    caveats: list[str] = field(default_factory=list)
    apply: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    selector: dict[str, str] | None = None  # the EnvoyFilter's workloadSelector, if written

    @property
    def complete(self) -> bool:
        """Every re-audit passes and nothing was left out."""
        return not self.caveats and any(r["passed"] for r in self.rechecks.values())


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (a ConfigMap's JSON) as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_yaml(data: Any, header: str = "") -> str:
    """YAML in the order given, with an optional ``#`` comment header."""
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
    comment = "".join(f"# {line}\n".replace("# \n", "#\n") for line in header.splitlines())
    return comment + body


def overlay_for(
    run: AuditRun, plan: FixPlan, *, runtime: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The overlay that merges cleanly into the audited bootstrap, and what it leaves out."""
    base = run.config.bootstrap.value
    overlay, dropped = split_duplicates(base, plan.bootstrap)
    keys = dict(plan.runtime if runtime is None else runtime)
    if keys:
        layers: list[dict[str, Any]] = [{"name": RUNTIME_LAYER, "static_layer": keys}]
        if not base.get("layered_runtime"):  # /runtime_modify needs an admin layer
            layers.append({"name": "admin", "admin_layer": {}})
        overlay["layered_runtime"] = {"layers": layers}
    return overlay, dropped


_STREAM_CUT = {
    "stream_idle_timeout": "a stream with no activity for {v} is reset (server-sent events, "
    "WebSocket, gRPC streams that go quiet); a route can override it: route idle_timeout, "
    "'0s' disables it on that route (Istio: an EnvoyFilter HTTP_ROUTE MERGE of "
    "{{route: {{idle_timeout: 0s}}}})",
    "request_timeout": "a request whose body takes longer than {v} to arrive is cut (long "
    "uploads, client-streaming gRPC); there is no per-route override: raise it, or disable "
    "the rule with --rules (id request-timeout, enabled: false) for a gateway that streams",
}


def timeout_warnings(plan: FixPlan) -> list[str]:
    """What the plan's HCM timeouts change for users, and how to exempt routes."""
    found: dict[str, Any] = {}
    for fix in plan.hcms.values():
        for key in _STREAM_CUT:
            if key in fix.fields:
                found[key] = fix.fields[key]
    return [
        f"{key} {value} on every route of {len(plan.hcms)} HTTP connection manager(s): "
        + _STREAM_CUT[key].format(v=value)
        for key, value in found.items()
    ]


def _leaf(fix: Any, key: str) -> tuple[bool, Any]:
    """The fix's value for a field named ``key`` (or its only value)."""
    leaves: list[tuple[str, Any]] = []

    def collect(value: Any, name: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                collect(v, str(k))
        elif isinstance(value, list):
            for item in value:
                collect(item, name)
        else:
            leaves.append((name, value))

    collect(fix, "")
    named = [value for name, value in leaves if name == key]
    if named:
        return True, named[-1]
    return (True, leaves[0][1]) if len(leaves) == 1 else (False, None)


def _in_place(root: dict[str, Any], prefix: str, checks: tuple[Check, ...]) -> None:
    """Set failing values that are there (e.g. Istio's 2147483647 monitor) to the fix's.

    Only a rule with a fix, checked on one target: a rule without one is manual work
    (its value is never overwritten), and a route or cluster verdict's path is just
    the first of the routes or clusters it sums up.
    """
    for check in checks:
        if check.status != "fail" or not check.present or not check.path.startswith(prefix + "."):
            continue
        if not check.rule.fix or check.rule.granularity in ("route", "cluster"):
            continue
        tokens = path_tokens(check.path[len(prefix) + 1 :])
        found, value = _leaf(check.rule.fix, str(tokens[-1]))
        if found:
            set_path(root, tokens, value)


def _control_plane_advice(run: AuditRun) -> str:
    if run.role.role == "gateway":
        return " (this is an Istio gateway: --fix istio writes the EnvoyFilter)"
    if run.role.role in ("sidecar", "waypoint"):
        return (
            f" (an Istio {run.role.role}: an EnvoyFilter with context "
            f"{'SIDECAR_INBOUND' if run.role.role == 'sidecar' else 'WAYPOINT'}, written "
            "by hand)"
        )
    return ""


def _patched(run: AuditRun, plan: FixPlan) -> tuple[dict[str, Any], list[str]]:
    prefix = run.config.bootstrap.path
    boot = copy.deepcopy(dict(run.config.bootstrap.value))
    _in_place(boot, prefix, run.checks)
    boot = upsert(boot, plan.bootstrap)
    overlay, _ = overlay_for(run, FixPlan(runtime=plan.runtime))
    if "layered_runtime" in overlay:
        layers = boot.setdefault("layered_runtime", {}).setdefault("layers", [])
        layers.extend(overlay["layered_runtime"]["layers"])
    manual: list[str] = []
    how = _control_plane_advice(run)
    edits = [(listener.section.path, fields) for listener, fields in plan.listeners.values()]
    edits += [(fix.hcm.path, fix.fields) for fix in plan.hcms.values()]
    edits += [(listener.section.path, {"name": name}) for listener, name in plan.names.values()]
    inside = [c for c in plan.clusters if c.path.startswith(prefix + ".")]
    edits += [(cluster.path, plan.cluster_fields) for cluster in inside]
    if len(inside) < len(plan.clusters):
        manual.append(
            f"{len(plan.clusters) - len(inside)} clusters (first: "
            f"{next(c.path for c in plan.clusters if c not in inside)}): set "
            f"{json.dumps(plan.cluster_fields)} through the control plane that "
            f"delivers them{how}"
        )
    for path, fields in edits:
        if not path.startswith(prefix + "."):
            manual.append(
                f"{path}: set {json.dumps(fields)} through the control plane that delivers it{how}"
            )
            continue
        tokens = path_tokens(path[len(prefix) + 1 :])
        target: Any = boot
        for token in tokens:
            target = target[token]
        target.update(upsert(target, fields))
    return boot, manual


def _bootstrap_decoded(run: AuditRun, boot: dict[str, Any]) -> Decoded:
    if run.decoded.kind == "bootstrap":
        return Decoded("bootstrap", boot, run.decoded.syntax, run.decoded.notes)
    data = copy.deepcopy(run.decoded.data)
    set_path(data, path_tokens(run.config.bootstrap.path), boot)
    return Decoded(run.decoded.kind, data, run.decoded.syntax, run.decoded.notes)


def _outcome(name: str, report: Mapping[str, Any]) -> str:
    if report["passed"]:
        return f"{name}: the audit passes ({report['summary']['checks']} checks)"
    return f"{name}: still failing: {', '.join(report['summary']['failed_rules'])}"


def envoy_fix(run: AuditRun, plan: FixPlan, facts: GatewayFacts) -> FixFiles:
    """The overlay (when it has anything), the patched bootstrap and a summary, re-audited."""
    out = FixFiles()
    out.lines += size_heap(plan, run.config.bootstrap.value, facts)
    overlay, dropped = overlay_for(run, plan)
    if overlay:
        merged = run.again(with_overlay(run.decoded, overlay))
        out.rechecks["overlay"] = merged.report
        header = (
            f"Envoy bootstrap overlay written by `gameday audit envoy --fix envoy` for\n"
            f"{run.origin} (profile {run.profile.name}).\n"
            'Merge it: envoy -c bootstrap.yaml --config-yaml "$(cat envoy-overlay.yaml)"\n'
            "(Envoy appends repeated fields: it adds only what is missing)"
        )
        out.files["envoy-overlay.yaml"] = render_yaml(overlay, header)
        out.lines.append(
            _outcome("envoy-overlay.yaml merged as Envoy merges --config-yaml", merged.report)
        )
        out.apply.append('envoy -c bootstrap.yaml --config-yaml "$(cat envoy-overlay.yaml)"')
    else:
        out.lines.append(
            "no envoy-overlay.yaml: nothing the failing rules need can be added "
            "with --config-yaml (see the patched bootstrap)"
        )
    out.lines += [
        f"not in the overlay (Envoy would refuse a second {p}): edit it in place" for p in dropped
    ]
    boot, manual = _patched(run, plan)
    name = "envoy-bootstrap.patched." + ("yaml" if run.decoded.syntax == "YAML" else "json")
    if run.decoded.kind == "bootstrap" or boot != run.config.bootstrap.value:
        patched = run.again(_bootstrap_decoded(run, boot))
        out.rechecks["patched"] = patched.report
        header = (
            f"{run.origin} with every fix written in place by `gameday audit envoy "
            "--fix envoy`.\nThe source's comments are not carried over: diff it "
            "against the source before replacing it."
        )
        out.files[name] = (
            render_yaml(boot, header)
            if name.endswith("yaml")
            else json.dumps(boot, indent=2) + "\n"
        )
        out.lines.append(_outcome(f"{name} (every fix written in place)", patched.report))
        out.apply.append(f"# or deploy {name} as the bootstrap")
    out.caveats += [f"manual: {item}" for item in manual]
    out.caveats += [f"manual: {rule}: {why}" for rule, why in plan.manual]
    out.warnings += timeout_warnings(plan)
    return out
