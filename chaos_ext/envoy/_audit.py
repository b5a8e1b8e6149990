"""Evaluate rules on a parsed configuration. Pure.

A rule is checked once (``bootstrap``/``runtime`` scope), once per audited
listener (``listener`` scope or a runtime key with ``{listener}``), once per
HTTP connection manager of each audited listener (``hcm``: every filter chain
must comply, e.g. one per SNI host on an Istio gateway's 8443 listener), or
once over all upstream clusters (``cluster``: one verdict, the failing
clusters named), or once over every forwarding route of the audited HCMs'
route configurations (``route``: one verdict, the failing routes named by
label, :mod:`._routes`; routes a rule exempts are counted apart, and route
configurations the input lacks make the verdict ``unreadable`` in a dump,
``not-in-input`` in a bootstrap that leaves them to RDS, never ``pass``).

Each check has a status: ``pass``, ``fail``, ``unreadable`` (the value or the
object holding it is there but cannot be interpreted: never reported as
absent), ``warn`` (an unnamed listener that a runtime limit cannot address, in
profiles that do not fail it; a rule with ``on_fail: warn`` that is not met) or
``not-in-input`` (listeners, clusters or routes that a bootstrap leaves to
LDS/CDS/RDS). ``fail`` and ``unreadable`` fail the audit.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from chaos_ext.envoy._dump import EdgeConfig, Listener, Section
from chaos_ext.envoy._routes import ServedRoute, Unresolved, served_routes
from chaos_ext.envoy._rules import (
    LISTENER_PLACEHOLDER,
    Condition,
    Location,
    Rule,
    compare,
    compiled_path,
)

__all__ = [
    "ABSENT",
    "FAILING",
    "Check",
    "cluster_checks",
    "cluster_statuses",
    "evaluate",
    "route_checks",
    "walk",
]

ABSENT = "absent"
"""What the report says for ``found`` when no location of the rule is in the input."""
FAILING = ("fail", "unreadable")
_PLAIN = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class Check:
    """One verdict: a rule on one target (global, a listener, an HCM, the clusters)."""

    rule: Rule
    listener: str | None
    status: str
    found: Any
    present: bool
    path: str
    note: str = ""
    detail: dict[str, Any] | None = field(default=None)
    target: Listener | None = field(default=None, compare=False, repr=False)

    @property
    def passed(self) -> bool:
        return self.status not in FAILING

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.id,
            "title": self.rule.title,
            "severity": self.rule.severity,
            "listener": self.listener,
            "status": self.status,
            "pass": self.passed,
            "expected": self.rule.expected,
            "found": self.found if self.present else ABSENT,
            "path": self.path,
            "envoy_default": self.rule.envoy_default or None,
            "note": self.note or None,
            "detail": self.detail,
            "source": self.rule.cites or None,
        }


def walk(value: Any, expr: str) -> tuple[bool, Any]:
    """Follow a plain dotted path (``a.b.c``); what jsonpath-ng finds, ~30x faster."""
    for key in expr.split("."):
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _lookup(
    location: Location, config: EdgeConfig, section: Section | None, listener: Listener | None
) -> tuple[bool, Any, str]:
    """(found, value, path) of one location; path is where it was looked for if absent."""
    if location.scope == "runtime":
        key = location.expr.replace(LISTENER_PLACEHOLDER, (listener.name or "") if listener else "")
        hit = config.runtime.get(key)
        if hit is not None:
            return True, hit.value, hit.path
        return False, None, f"{config.runtime_path}[{json.dumps(key)}]"
    target = config.bootstrap if location.scope == "bootstrap" else section
    if target is None:  # evaluate() passes the section of the rule's scope
        raise ValueError(f"no {location.scope} section to look in")
    if _PLAIN.match(location.expr):
        found, value = walk(target.value, location.expr)
        return found, value, f"{target.path}.{location.expr}"
    matches = compiled_path(location.expr).find(target.value)
    if matches:
        where = str(matches[0].full_path).replace(".[", "[")
        return True, matches[0].value, f"{target.path}.{where}"
    return False, None, f"{target.path}.{location.expr}"


def _unnamed(rule: Rule, config: EdgeConfig, listener: Listener) -> Check:
    prefix, _, suffix = rule.at[0].expr.partition(LISTENER_PLACEHOLDER)
    elsewhere = sorted(
        key[len(prefix) : len(key) - len(suffix)]
        for key in config.runtime
        if key.startswith(prefix) and key.endswith(suffix)
    )
    known = {item.name for item in config.listeners}
    orphans = [name for name in elsewhere if name and name not in known]
    note = (
        f"the listener has no name: Envoy gives it a generated one, so the runtime key "
        f"{rule.at[0].expr} cannot address it. Fix: give the listener a name"
        f" ({listener.section.path}.name)"
    )
    if orphans:
        note += (
            f"; the runtime sets {prefix}{orphans[0]}{suffix}, but no listener is named "
            f"{orphans[0]!r}: name this listener {orphans[0]!r}"
        )
    return Check(
        rule,
        listener.label,
        rule.unnamed_listener,
        None,
        False,
        f"{listener.section.path}.name",
        note,
        target=listener,
    )


def _check(
    rule: Rule, config: EdgeConfig, section: Section | None, listener: Listener | None
) -> Check:
    label = listener.label if listener else None
    if (
        listener is not None
        and listener.name is None
        and any(LISTENER_PLACEHOLDER in loc.expr for loc in rule.at)
    ):
        return _unnamed(rule, config, listener)
    if section is not None and section.problem:
        return Check(
            rule, label, "unreadable", None, False, section.path, section.problem, target=listener
        )
    tried: list[str] = []
    for location in rule.at:
        found, value, path = _lookup(location, config, section, listener)
        if found:
            verdict = compare(rule.op, value, rule.value)
            if verdict is None:
                note = f"{type(value).__name__} value cannot be read as {rule.expected}"
                return Check(rule, label, "unreadable", value, True, path, note, target=listener)
            return Check(
                rule, label, "pass" if verdict else "fail", value, True, path, target=listener
            )
        tried.append(path)
    where = " | ".join(tried)
    if any(loc.scope == "runtime" for loc in rule.at) and config.opaque_runtime_layers:
        note = (
            "not in the static runtime layers; the runtime also has "
            f"{', '.join(config.opaque_runtime_layers)}, whose values the input does not show"
        )
        return Check(rule, label, "unreadable", None, False, where, note, target=listener)
    status = "pass" if rule.when_absent == "pass" else "fail"
    note = f"absent: Envoy uses {rule.envoy_default}" if rule.envoy_default else "absent"
    return Check(rule, label, status, None, False, where, note, target=listener)


def cluster_checks(rule: Rule, config: EdgeConfig) -> list[tuple[Section, Check]]:
    """The rule on each upstream cluster (what the one cluster verdict sums up)."""
    return [(cluster, _check(rule, config, cluster, None)) for cluster in config.clusters]


def _cluster_status(rule: Rule, cluster: Section) -> str | None:
    """pass/fail of a plain-path rule on one cluster without building a Check (None: ask _check).

    A gateway has tens of thousands of clusters: this is the audit's hot loop.
    """
    if cluster.problem or len(rule.at) != 1 or not _PLAIN.match(rule.at[0].expr):
        return None
    found, value = walk(cluster.value, rule.at[0].expr)
    if not found:
        return "pass" if rule.when_absent == "pass" else "fail"
    verdict = compare(rule.op, value, rule.value)
    return None if verdict is None else "pass" if verdict else "fail"


def cluster_statuses(rule: Rule, config: EdgeConfig) -> list[tuple[Section, str]]:
    """(cluster, status) for every upstream cluster."""
    out = []
    for cluster in config.clusters:
        status = _cluster_status(rule, cluster)
        out.append((cluster, status or _check(rule, config, cluster, None).status))
    return out


def _clusters(rule: Rule, config: EdgeConfig) -> Check:
    if not config.clusters:
        if config.clusters_from_cds:
            note = "clusters come from CDS at run time: audit the live /config_dump"
            return Check(
                rule, "clusters", "not-in-input", None, False, "dynamic_resources.cds_config", note
            )
        return Check(rule, "clusters", "pass", "no clusters", True, "static_resources.clusters")
    statuses = cluster_statuses(rule, config)
    bad = [(cluster, status) for cluster, status in statuses if status in FAILING]
    total = len(statuses)
    detail: dict[str, Any] = {
        "clusters": total,
        "failed": sum(1 for _, status in bad if status == "fail"),
        "unreadable": sum(1 for _, status in bad if status == "unreadable"),
        "failing": [str(c.value.get("name", c.path)) for c, _ in bad[:10]],
    }
    first = _check(rule, config, bad[0][0] if bad else config.clusters[0], None)
    status = "fail" if detail["failed"] else "unreadable" if detail["unreadable"] else "pass"
    note = f"all {total} clusters comply"
    if bad:
        why = f": {first.note}" if first.note else ""
        note = f"{len(bad)} of {total} clusters do not comply (first: {detail['failing'][0]}{why})"
    return Check(
        rule, f"{total} clusters", status, first.found, first.present, first.path, note, detail
    )


_WORST = {"fail": 3, "unreadable": 2, "pass": 1, "exempt": 0}


def _bounded(condition: Condition, route: ServedRoute) -> str:
    """Why the route meets the rule's ``unless`` (empty: it does not)."""
    for location in condition.at:
        target = route.action if location.scope == "route" else route.hcm
        found, value = walk(target.value, location.expr)
        if found:
            if compare(condition.op, value, condition.value):
                return f"but {target.path}.{location.expr} = {value}"
            return ""
    return ""


def _route_check(rule: Rule, config: EdgeConfig, route: ServedRoute) -> tuple[str, Check]:
    check = _check(rule, config, route.action, None)
    if any(fnmatch.fnmatchcase(route.label, pattern) for pattern in rule.exempt_routes):
        return "exempt", check
    if check.status == "fail" and rule.unless is not None:
        why = _bounded(rule.unless, route)
        if why:
            return "pass", replace(check, status="pass", note=why)
    return check.status, check


def route_checks(
    rule: Rule, config: EdgeConfig, listeners: Sequence[Listener]
) -> tuple[dict[str, tuple[str, str, Check]], list[Unresolved], int]:
    """The rule on each route: {RouteAction path: (label, status, check)}, unresolved, no upstream.

    A route served by two HCMs is checked under each and keeps its worst status.
    """
    served = served_routes(
        [(item.label, hcm) for item in listeners for hcm in item.hcms], config.routes
    )
    out: dict[str, tuple[str, str, Check]] = {}
    for route in served.routes:
        status, check = _route_check(rule, config, route)
        old = out.get(route.action.path)
        if old is None or _WORST[status] > _WORST[old[1]]:
            out[route.action.path] = (route.label, status, check)
    return out, served.unresolved, served.without_upstream


def _route_note(status: str, total: int, bad: list[str], detail: dict[str, Any], why: str) -> str:
    if bad:
        verb = "do not comply" if status == "fail" else "cannot be read"
        more = f" and {len(bad) - 3} more (detail.failing)" if len(bad) > 3 else ""
        because = f" ({why})" if why else ""
        exempt = f" ({len(detail['exempt'])} exempt)" if detail["exempt"] else ""
        shown = "; ".join(bad[:3])
        return f"{len(bad)} of {total} routes{exempt} {verb}: {shown}{more}{because}"
    if status in ("unreadable", "not-in-input"):
        return "; ".join(item["note"] for item in detail["unresolved"][:3])
    exempt = f", {len(detail['exempt'])} exempt (exempt_routes)" if detail["exempt"] else ""
    return f"all {total} routes comply{exempt}" if total else "no forwarding routes"


def _routes(rule: Rule, config: EdgeConfig, listeners: Sequence[Listener]) -> Check:
    if not any(item.hcms for item in listeners):
        note = "no HTTP connection manager on the audited listeners: no routes to check"
        where = listeners[0].section.path if listeners else "listeners"
        return Check(rule, "routes", "fail", None, False, where, note)
    checks, unresolved, no_upstream = route_checks(rule, config, listeners)
    rows = list(checks.values())
    failing = [label for label, status, _ in rows if status == "fail"]
    unreadable = [label for label, status, _ in rows if status == "unreadable"]
    detail: dict[str, Any] = {
        "routes": len(rows),
        "failed": len(failing),
        "unreadable": len(unreadable) + sum(u.status == "unreadable" for u in unresolved),
        "not_in_input": sum(u.status == "not-in-input" for u in unresolved),
        "exempt": [label for label, status, _ in rows if status == "exempt"],
        "without_upstream": no_upstream,
        "failing": (failing or unreadable)[:50],
        "unresolved": [{"routes": u.label, "note": u.note, "path": u.path} for u in unresolved],
    }
    status = "fail" if failing else "unreadable" if detail["unreadable"] else "pass"
    if status == "pass" and detail["not_in_input"]:
        status = "not-in-input"
    first = next((c for _, s, c in rows if s == status), None)
    if first is not None:
        where, found, present, why = first.path, first.found, first.present, first.note
    elif unresolved:
        where, found, present, why = unresolved[0].path, None, False, ""
    else:
        where, found, present, why = "routes", "no forwarding routes", True, ""
    note = _route_note(status, len(rows), failing or unreadable, detail, why)
    return Check(rule, f"{len(rows)} routes", status, found, present, where, note, detail)


def _not_in_input(rule: Rule) -> Check:
    return Check(
        rule,
        "(from LDS)",
        "not-in-input",
        None,
        False,
        "dynamic_resources.lds_config",
        "listeners come from LDS at run time: audit the live /config_dump",
    )


def _checks_of(rule: Rule, config: EdgeConfig, listeners: Sequence[Listener]) -> Iterator[Check]:
    if rule.granularity == "global":
        yield _check(rule, config, None, None)
        return
    if rule.granularity == "cluster":
        yield _clusters(rule, config)
        return
    if not listeners and config.listeners_from_lds:
        yield _not_in_input(rule)
        return
    if rule.granularity == "route":
        yield _routes(rule, config, listeners)
        return
    for listener in listeners:
        if rule.granularity == "listener":
            yield _check(rule, config, listener.section, listener)
        elif not listener.hcms:  # an hcm rule on a listener without HTTP: fails, says so
            path = listener.section.path + ".filter_chains[*].filters[?HttpConnectionManager]"
            yield Check(
                rule,
                listener.label,
                "fail",
                None,
                False,
                path,
                "no HTTP connection manager on this listener",
                target=listener,
            )
        else:
            for hcm in listener.hcms:
                yield _check(rule, config, hcm, listener)


def evaluate(
    config: EdgeConfig, listeners: Sequence[Listener], rules: Sequence[Rule]
) -> list[Check]:
    """Every rule on every target it applies to, in rule order."""
    checks = [check for rule in rules for check in _checks_of(rule, config, listeners)]
    return [
        replace(check, status="warn")
        if check.status == "fail" and check.rule.on_fail == "warn"
        else check
        for check in checks
    ]
