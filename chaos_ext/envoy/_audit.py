"""Evaluate edge rules on a parsed dump and build the JSON report. Pure.

A rule is checked once (``bootstrap``/``runtime`` scope), once per audited
listener (``listener`` scope or a runtime key with ``{listener}``), or once per
HTTP connection manager of each audited listener (``hcm`` scope: every filter
chain must comply, e.g. one per SNI host on an Istio gateway's 8443 listener).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from chaos_ext.envoy._dump import EdgeConfig, Listener, Section
from chaos_ext.envoy._rules import LISTENER_PLACEHOLDER, Location, Rule, compare, compiled_path

__all__ = ["ABSENT", "Check", "audit_report", "evaluate", "walk"]

ABSENT = "absent"
"""What the report says for ``found`` when no location of the rule is in the dump."""

_PLAIN = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NO_HCM = '.filter_chains[*].filters[?typed_config."@type" = HttpConnectionManager]'


@dataclass(frozen=True)
class Check:
    """One verdict: a rule on one target (global, a listener, or one HCM)."""

    rule: Rule
    listener: str | None
    found: Any
    present: bool
    path: str
    passed: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.id,
            "title": self.rule.title,
            "severity": self.rule.severity,
            "listener": self.listener,
            "expected": self.rule.expected,
            "found": self.found if self.present else ABSENT,
            "pass": self.passed,
            "path": self.path,
            "envoy_default": self.rule.envoy_default or None,
        }


def _pretty(full_path: Any) -> str:
    return str(full_path).replace(".[", "[")


def _section(
    scope: str, config: EdgeConfig, listener: Listener | None, hcm: Section | None
) -> Section:
    if scope == "bootstrap":
        return config.bootstrap
    section = listener.section if scope == "listener" and listener else hcm
    if section is None:  # evaluate() always passes the section of the rule's scope
        raise ValueError(f"no {scope} section to look in")
    return section


def walk(value: Any, expr: str) -> tuple[bool, Any]:
    """Follow a plain dotted path (``a.b.c``); what jsonpath-ng finds, ~30x faster."""
    for key in expr.split("."):
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _lookup(
    location: Location, config: EdgeConfig, listener: Listener | None, hcm: Section | None
) -> tuple[bool, Any, str]:
    """(found, value, path) of one location; path is where it was looked for if absent."""
    if location.scope == "runtime":
        key = location.expr.replace(LISTENER_PLACEHOLDER, listener.name if listener else "")
        hit = config.runtime.get(key)
        if hit is not None:
            return True, hit.value, hit.path
        return False, None, f"{config.runtime_path}[{json.dumps(key)}]"
    section = _section(location.scope, config, listener, hcm)
    if _PLAIN.match(location.expr):
        found, value = walk(section.value, location.expr)
        where = f"{section.path}.{location.expr}"
        return found, value, where
    matches = compiled_path(location.expr).find(section.value)
    if matches:
        return True, matches[0].value, f"{section.path}.{_pretty(matches[0].full_path)}"
    return False, None, f"{section.path}.{location.expr}"


def _check(rule: Rule, config: EdgeConfig, listener: Listener | None, hcm: Section | None) -> Check:
    tried: list[str] = []
    name = listener.name if listener else None
    for location in rule.at:
        found, value, path = _lookup(location, config, listener, hcm)
        if found:
            passed = compare(rule.op, value, rule.value)
            return Check(rule, name, value, True, path, passed)
        tried.append(path)
    return Check(rule, name, None, False, " | ".join(tried), False)


def _checks_of(rule: Rule, config: EdgeConfig, listeners: Sequence[Listener]) -> Iterator[Check]:
    if rule.granularity == "global":
        yield _check(rule, config, None, None)
        return
    for listener in listeners:
        if rule.granularity == "listener":
            yield _check(rule, config, listener, None)
        elif not listener.hcms:  # an hcm rule on a listener without HTTP: fails, says so
            path = listener.section.path + _NO_HCM
            yield Check(rule, listener.name, None, False, path, False)
        else:
            for hcm in listener.hcms:
                yield _check(rule, config, listener, hcm)


def evaluate(
    config: EdgeConfig, listeners: Sequence[Listener], rules: Sequence[Rule]
) -> list[Check]:
    """Every rule on every target it applies to, in rule order."""
    return [check for rule in rules for check in _checks_of(rule, config, listeners)]


def audit_report(
    checks: Sequence[Check], *, source: str, listeners: Sequence[Listener]
) -> dict[str, Any]:
    """The JSON-friendly result of an audit (what the probe returns)."""
    failed = [c for c in checks if not c.passed]
    failed_rules = sorted({c.rule.id for c in failed})
    return {
        "source": source,
        "listeners": [item.name for item in listeners],
        "passed": not failed,
        "summary": {
            "rules": len({c.rule.id for c in checks}),
            "checks": len(checks),
            "passed": len(checks) - len(failed),
            "failed": len(failed),
            "failed_rules": failed_rules,
        },
        "results": [c.as_dict() for c in checks],
    }
