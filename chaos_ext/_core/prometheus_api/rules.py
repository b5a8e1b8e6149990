"""Prometheus alerting rules as input: rule files, ``PrometheusRule`` resources, selectors.

Accepted documents (YAML, several per file with ``---``):

* a Prometheus rule file: ``groups: [{name, rules: [{alert, expr, for, ...}]}]``
  (what ``promtool check rules`` reads, and what the mixins generate);
* a ``PrometheusRule`` resource (``apiVersion: monitoring.coreos.com/v1``), whose
  ``spec.groups`` has the same shape (kube-prometheus, the operator's CRD);
* a Kubernetes ``List`` of them (``kubectl get prometheusrules -o yaml``).

Recording rules (``record:``) are skipped: they are not alerts. Selectors pick
alerts by name and labels with Alertmanager's matcher syntax, ANDed within one
selector (``severity=critical,alertname=~"CoreDNS.*"``); a bare word is an
alert name (``KubeAPIDown``). Several selectors are ORed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from chaos_ext._core.prometheus_api import promtool
from chaos_ext._core.prometheus_api.promql import check_promql
from chaos_ext.errors import InvalidArgument

__all__ = [
    "AlertRule",
    "Matcher",
    "Selector",
    "is_rule_document",
    "load_rules",
    "parse_rule_documents",
    "parse_selector",
    "prom_duration",
    "select_rules",
]

_RULE_KEYS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
_GROUP_KEYS = {
    "name",
    "interval",
    "rules",
    "limit",
    "query_offset",
    "partial_response_strategy",
    "source_tenants",
    "labels",
}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MATCHER = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$")
_PROMETHEUS_RULE = "monitoring.coreos.com/"


def prom_duration(raw: Any, where: str) -> float:
    """Seconds in a Prometheus duration (``10m``, ``1h30m``, ``0s``); 0 when absent."""
    if raw is None or raw == "":
        return 0.0
    text = str(raw).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise InvalidArgument(f"{where}: {raw!r} is not a Prometheus duration like 10m or 1h30m")
    return float(sum(int(n) * _UNIT[u] for n, u in parts))


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule, as Prometheus would evaluate it."""

    name: str
    expr: str
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    group: str = ""
    source: str = ""

    @property
    def all_labels(self) -> dict[str, str]:
        """The labels a selector sees before evaluation: the rule's own plus ``alertname``."""
        return {**self.labels, "alertname": self.name}

    def describe(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for_s": self.for_s,
            "keep_firing_for_s": self.keep_firing_for_s,
            "labels": dict(self.labels),
            "group": self.group,
            "source": self.source,
        }


def _strings(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"{where} must be a mapping of strings")
    return {str(k): str(v) for k, v in raw.items()}


def _rule(spec: Any, where: str, group: str, source: str) -> AlertRule | None:
    if not isinstance(spec, Mapping):
        raise InvalidArgument(f"{where} must be a mapping with 'alert' or 'record' and 'expr'")
    extra = sorted(set(spec) - _RULE_KEYS)
    if extra:
        raise InvalidArgument(f"{where}: unknown key(s) {extra}; allowed: {sorted(_RULE_KEYS)}")
    if "record" in spec:
        check_promql(str(spec.get("expr") or ""), f"{where} ({spec['record']}): expr")
        return None
    name, expr = spec.get("alert"), spec.get("expr")
    if not isinstance(name, str) or not _LABEL.match(name.replace(":", "_")):
        raise InvalidArgument(f"{where}: 'alert' must be an alert name, got {name!r}")
    if expr is None or not str(expr).strip():
        raise InvalidArgument(f"{where} ({name}): 'expr' is required")
    check_promql(str(expr), f"{where} ({name}): expr")
    return AlertRule(
        name=name,
        expr=str(expr).strip(),
        for_s=prom_duration(spec.get("for"), f"{where}.for"),
        keep_firing_for_s=prom_duration(spec.get("keep_firing_for"), f"{where}.keep_firing_for"),
        labels=_strings(spec.get("labels"), f"{where}.labels"),
        annotations=_strings(spec.get("annotations"), f"{where}.annotations"),
        group=group,
        source=source,
    )


def _groups(groups: Any, where: str, source: str) -> list[AlertRule]:
    if not isinstance(groups, list):
        raise InvalidArgument(f"{where}: 'groups' must be a list of rule groups")
    rules: list[AlertRule] = []
    for g, group in enumerate(groups):
        at = f"{where}.groups[{g}]"
        if not isinstance(group, Mapping) or not isinstance(group.get("rules"), list | None):
            raise InvalidArgument(f"{at} must be a mapping with 'name' and a 'rules' list")
        extra = sorted(set(group) - _GROUP_KEYS)
        if extra:
            raise InvalidArgument(f"{at}: unknown key(s) {extra}")
        name = str(group.get("name") or f"group-{g}")
        for r, spec in enumerate(group.get("rules") or []):
            rule = _rule(spec, f"{at}.rules[{r}]", name, source)
            if rule is not None:
                rules.append(rule)
    return rules


def is_rule_document(document: Any) -> bool:
    """True for a rule file, a PrometheusRule or a List of them (not an abort plan)."""
    if not isinstance(document, Mapping):
        return False
    if "groups" in document:
        return True
    kind, api = document.get("kind"), str(document.get("apiVersion") or "")
    return (
        kind == "PrometheusRule"
        or (kind == "List" and "items" in document)
        or (api.startswith(_PROMETHEUS_RULE))
    )


def _document(document: Any, where: str, source: str) -> list[AlertRule]:
    if not isinstance(document, Mapping):
        raise InvalidArgument(f"{where}: expected a rule file (groups:) or a PrometheusRule")
    if "groups" in document:
        return _groups(document["groups"], where, source)
    kind = document.get("kind")
    if kind == "List":
        items = document.get("items") or []
        return [
            r
            for i, item in enumerate(items)
            for r in _document(item, f"{where}.items[{i}]", source)
        ]
    if kind == "PrometheusRule":
        spec = document.get("spec")
        if not isinstance(spec, Mapping) or "groups" not in spec:
            raise InvalidArgument(f"{where}: a PrometheusRule needs spec.groups")
        name = (document.get("metadata") or {}).get("name", "")
        return _groups(spec["groups"], f"{where} (PrometheusRule {name})", source)
    raise InvalidArgument(
        f"{where}: kind {kind!r} is not a PrometheusRule, and there is no 'groups' key"
    )


def parse_rule_documents(documents: Iterable[Any], source: str) -> list[AlertRule]:
    """Alerting rules of parsed YAML documents (empty documents are skipped)."""
    rules: list[AlertRule] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        rules.extend(_document(document, f"{source}[doc {index}]", source))
    return rules


def _check_with_promtool(path: Path, documents: list[Any]) -> None:
    """A plain rule file is also checked by ``promtool check rules`` when it is installed:
    Prometheus' own parser, templates included (an undefined ``$label``)."""
    plain = [d for d in documents if d is not None]
    if len(plain) != 1 or not isinstance(plain[0], dict) or "apiVersion" in plain[0]:
        return  # PrometheusRule manifests and multi-document files are not promtool's format
    problems = promtool.rule_file_problems(path)
    if problems:
        raise InvalidArgument(f"alert rules {path}: promtool check rules: {'; '.join(problems)}")


def load_rules(path: Path) -> list[AlertRule]:
    """The alerting rules of a rule file or PrometheusRule manifest."""
    try:
        documents = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidArgument(f"alert rules {path}: {exc}") from exc
    rules = parse_rule_documents(documents, str(path))
    _check_with_promtool(path, documents)
    if not rules:
        raise InvalidArgument(f"alert rules {path}: no alerting rule in it (recording rules only?)")
    return rules


@dataclass(frozen=True)
class Matcher:
    """``label op value`` as Alertmanager writes it (``=``, ``!=``, ``=~``, ``!~``)."""

    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.label, "")
        if self.op in ("=", "!="):
            return (actual == self.value) == (self.op == "=")
        found = re.fullmatch(self.value, actual) is not None
        return found == (self.op == "=~")

    def __str__(self) -> str:
        return f'{self.label}{self.op}"{self.value}"'


@dataclass(frozen=True)
class Selector:
    """Matchers that must all hold (one ``--alerts`` value)."""

    matchers: tuple[Matcher, ...]
    text: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.matchers)


def _split(text: str) -> list[str]:
    """Split on commas outside double quotes."""
    parts, current, quoted = [], "", False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def parse_selector(text: str) -> Selector:
    """``severity=critical,alertname=~"CoreDNS.*"`` (braces optional; a bare word is a name)."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    matchers: list[Matcher] = []
    for raw in (p.strip() for p in _split(body)):
        if not raw:
            continue
        found = _MATCHER.match(raw)
        if found is None:
            if not _LABEL.match(raw.replace(":", "_")):
                raise InvalidArgument(f"--alerts {text!r}: {raw!r} is not label=value or a name")
            matchers.append(Matcher("alertname", "=", raw))
            continue
        label, op, value = found.groups()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if op in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as exc:
                raise InvalidArgument(f"--alerts {text!r}: bad regex {value!r}: {exc}") from exc
        matchers.append(Matcher(label, op, value))
    if not matchers:
        raise InvalidArgument(f"--alerts {text!r} selects nothing; e.g. severity=critical")
    return Selector(tuple(matchers), text)


def select_rules(
    rules: Sequence[AlertRule],
    selectors: Sequence[Selector],
    source: str,
    required: bool = True,
) -> list[AlertRule]:
    """The rules any selector matches (all without selectors); with ``required``,
    none selected is an error."""
    if not selectors:
        return list(rules)
    chosen = [r for r in rules if any(s.matches(r.all_labels) for s in selectors)]
    if not chosen and required:
        severities = sorted({r.labels.get("severity", "") for r in rules} - {""})
        raise InvalidArgument(
            f"{source}: {' or '.join(repr(s.text) for s in selectors)} selects none of its "
            f"{len(rules)} alerts (severities there: {', '.join(severities) or 'none'})"
        )
    return chosen
