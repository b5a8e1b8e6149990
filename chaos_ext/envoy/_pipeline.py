"""One audit: fetch, decode, read, recognise the proxy, check, report.

Shared by the probe (``edge_config_audit``) and ``gameday audit envoy`` (which
also needs the parsed configuration and the checks to write fixes). All but
:func:`run_audit` (which fetches the source) are pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaoslib.types import Secrets

from chaos_ext._core.validation import require_range
from chaos_ext.envoy._audit import Check, evaluate
from chaos_ext.envoy._dump import EdgeConfig, Listener, edge_config, select_listeners
from chaos_ext.envoy._fetch import fetch_dump, parse_source
from chaos_ext.envoy._input import Decoded, decode
from chaos_ext.envoy._profiles import DEFAULT_PROFILE, PROFILES, Profile, effective_rules
from chaos_ext.envoy._report import audit_report, describe_input
from chaos_ext.envoy._role import ROLES, Role, detect_role
from chaos_ext.envoy._rules import Rule
from chaos_ext.envoy.errors import EnvoyError
from chaos_ext.errors import InvalidArgument

__all__ = [
    "ROLE_CHOICES",
    "AuditRun",
    "audit_decoded",
    "audit_raw",
    "check_audit_arguments",
    "cluster_keys",
    "run_audit",
    "summary_line",
]

ROLE_CHOICES = ("auto", *ROLES)
_FIRST_FIELD = re.compile(r"[A-Za-z_]\w*")
_AUDIT_KEYS = ("source", "listener", "rules", "rules_file", "timeout_seconds", "profile", "role")


@dataclass(frozen=True)
class AuditRun:
    """Everything one audit produced."""

    decoded: Decoded
    config: EdgeConfig
    role: Role
    profile: Profile
    listeners: tuple[Listener, ...]
    checks: tuple[Check, ...]
    report: dict[str, Any]
    rules: tuple[Rule, ...] = ()
    listener_arg: str = ""
    role_arg: str = "auto"
    origin: str = ""

    def again(self, decoded: Decoded) -> AuditRun:
        """The same audit (profile, rules, listener, role) on another version of the input."""
        return audit_decoded(
            decoded,
            origin=self.origin,
            profile=self.profile,
            rules=self.rules,
            listener=self.listener_arg,
            role=self.role_arg,
        )


def _role(config: EdgeConfig, override: str) -> Role:
    if override not in ROLE_CHOICES:
        raise InvalidArgument(f"role: {override!r} is not one of {', '.join(ROLE_CHOICES)}")
    detected = detect_role(config)
    if override in ("auto", detected.role):
        return detected
    return Role(
        override,
        f"given as --role {override} (detected: {detected.role}, {detected.evidence})",
        detected.pod_ip,
        detected.namespace,
        detected.workload,
        detected.labels,
    )


def _refuse_mismatch(role: Role, profile: Profile, origin: str) -> None:
    if role.role in profile.applies_to:
        return
    if role.role == "sidecar":
        hint = "audit its inbound listeners with --profile sidecar"
    elif profile.name == "sidecar":
        hint = "use --profile envoy-edge or hardened"
    else:
        hint = "edge rules do not fit it; if it does serve the edge, say so with --role gateway"
    raise EnvoyError(
        f"{origin}: this is an Istio {role.role} ({role.evidence}), not what profile "
        f"{profile.name!r} is for ({', '.join(profile.applies_to)}): {hint}"
    )


_HEALTH_PORT = 15021  # Istio's status port: the default ingress Service exposes it


def _not_audited(config: EdgeConfig, listeners: Sequence[Listener]) -> list[str]:
    """Static listeners with an HTTP connection manager that the default choice skipped."""
    chosen = {id(item) for item in listeners}
    skipped = [
        item
        for item in config.listeners
        if not item.dynamic and item.hcms and id(item) not in chosen
    ]
    notes = []
    for item in skipped:
        address = (item.section.value.get("address") or {}).get("socket_address") or {}
        health = (
            " (Istio's health port: its default ingress Service exposes it)"
            if (address.get("port_value") == _HEALTH_PORT)
            else ""
        )
        notes.append(
            f"static listener {item.label}{health} takes HTTP but was not audited: "
            f"--listener {item.name or item.label!r} audits it"
        )
    return notes


def audit_decoded(
    decoded: Decoded,
    *,
    origin: str,
    profile: Profile,
    rules: Sequence[Rule],
    listener: str = "",
    role: str = "auto",
) -> AuditRun:
    """Audit a decoded input with ``rules`` of ``profile``."""
    config = edge_config(decoded, origin=origin)
    found_role = _role(config, role)
    _refuse_mismatch(found_role, profile, origin)
    inbound = profile.listeners == "inbound"
    listeners = select_listeners(
        config, listener, origin=origin, inbound=inbound, pod_ip=found_role.pod_ip
    )
    if inbound and not listeners and not config.listeners_from_lds:
        raise EnvoyError(f"{origin}: no inbound listener with an HTTP connection manager")
    checks = tuple(evaluate(config, listeners, rules))
    info = describe_input(config, decoded.data, decoded.syntax)
    info["notes"] += _not_audited(config, listeners)
    report = audit_report(
        checks,
        source=origin,
        listeners=listeners,
        profile=profile.name,
        role=found_role,
        input_info=info,
    )
    return AuditRun(
        decoded,
        config,
        found_role,
        profile,
        listeners,
        checks,
        report,
        tuple(rules),
        listener,
        role,
        origin,
    )


def cluster_keys(rules: Sequence[Rule]) -> frozenset[str] | None:
    """The cluster fields the rules look at (plus ``name``); None if one needs them all."""
    keys = {"name"}
    for rule in rules:
        for location in rule.at:
            if location.scope == "cluster":
                first = _FIRST_FIELD.match(location.expr)
                if first is None:
                    return None
                keys.add(first.group())
    return frozenset(keys)


def audit_raw(
    raw: bytes | str,
    *,
    origin: str,
    profile: Profile,
    rules: Sequence[Rule],
    listener: str = "",
    role: str = "auto",
) -> AuditRun:
    """Decode ``raw`` (a dump or a bootstrap, JSON or YAML) and audit it."""
    decoded = decode(raw, origin=origin, cluster_keys=cluster_keys(rules))
    return audit_decoded(
        decoded, origin=origin, profile=profile, rules=rules, listener=listener, role=role
    )


def summary_line(report: Mapping[str, Any]) -> str:
    """``50 checks of 19 rules on A, B: 48 passed, 2 failed`` (+ unreadable, warnings)."""
    s = report["summary"]
    parts = [f"{s['passed']} passed", f"{s['failed']} failed"]
    for key, word in (
        ("unreadable", "unreadable"),
        ("warnings", "warnings"),
        ("not_in_input", "not in this input"),
    ):
        if s[key]:
            parts.append(f"{s[key]} {word}")
    on = ", ".join(report["listeners"]) or "no listener"
    return f"{s['checks']} checks of {s['rules']} rules on {on}: {', '.join(parts)}"


def check_audit_arguments(arguments: Mapping[str, Any]) -> None:
    parse_source(arguments.get("source", ""))
    name = arguments.get("listener", "")
    if not isinstance(name, str) or len(name) > 256 or not name.isprintable():
        raise InvalidArgument(f"listener: {name!r} is not a listener name")
    require_range("timeout_seconds", arguments.get("timeout_seconds", 30.0), 0.1, 600)
    rules = arguments.get("rules")
    if rules is not None and not isinstance(rules, list):
        raise InvalidArgument(f"rules: expected a list of rule objects, got {rules!r}")
    profile = arguments.get("profile", DEFAULT_PROFILE)
    if profile not in PROFILES:
        raise InvalidArgument(f"profile: {profile!r} is not one of {', '.join(PROFILES)}")
    if arguments.get("role", "auto") not in ROLE_CHOICES:
        raise InvalidArgument(
            f"role: {arguments.get('role')!r} is not one of {', '.join(ROLE_CHOICES)}"
        )
    effective_rules(profile, rules, arguments.get("rules_file", ""))


def run_audit(
    source: str,
    *,
    listener: str = "",
    rules: list[dict[str, Any]] | None = None,
    rules_file: str = "",
    timeout_seconds: float = 30.0,
    profile: str = DEFAULT_PROFILE,
    role: str = "auto",
    secrets: Secrets = None,
    extra_rules: Sequence[Rule] = (),
) -> AuditRun:
    """Fetch ``source`` and audit it; the whole run (``gameday audit envoy`` writes fixes).

    ``extra_rules`` join the profile's (the heap rule, when the memory limit is known).
    """
    given = (source, listener, rules, rules_file, timeout_seconds, profile, role)
    check_audit_arguments(dict(zip(_AUDIT_KEYS, given, strict=True)))
    chosen, chosen_rules = effective_rules(profile, rules, rules_file)
    raw, origin = fetch_dump(parse_source(source), timeout=float(timeout_seconds), secrets=secrets)
    return audit_raw(
        raw,
        origin=origin,
        profile=chosen,
        rules=[*chosen_rules, *extra_rules],
        listener=listener,
        role=role,
    )
