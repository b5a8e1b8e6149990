"""Label and field selectors as the Kubernetes API server understands them.

Used by the API emulator (``k8s_emulator``) to answer ``?labelSelector=`` and
``?fieldSelector=`` the way a real API server does, and to match
PodDisruptionBudget selectors (``matchLabels`` + ``matchExpressions``).
Grammar: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["field_matcher", "label_matcher", "matches_label_selector"]

Matcher = Callable[[Mapping[str, Any]], bool]

_SET_TERM = re.compile(r"^\s*([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside ``in (a, b)`` parentheses."""
    terms, depth, current = [], 0, []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t.strip() for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[Mapping[str, str]], bool]:
    if found := _SET_TERM.match(term):
        key, op, raw = found.groups()
        values = {v.strip() for v in raw.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for op in ("!=", "==", "="):
        if op in term:
            key, value = (part.strip() for part in term.split(op, 1))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        key = term[1:].strip()
        return lambda labels: key not in labels
    return lambda labels: term in labels


def label_matcher(selector: str | None) -> Matcher:
    """A predicate on an object for a ``labelSelector`` string (empty: everything)."""
    tests = [_label_term(term) for term in _split_terms(selector or "")]

    def match(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(test(labels) for test in tests)

    return match


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_matcher(selector: str | None) -> Matcher:
    """A predicate for a ``fieldSelector`` string: ``path=value``, ``path!=value``, comma-joined."""
    tests: list[Callable[[Mapping[str, Any]], bool]] = []
    for term in _split_terms(selector or ""):
        negate = "!=" in term
        path, value = (p.strip() for p in re.split(r"!=|==|=", term, maxsplit=1))
        tests.append(
            (lambda o, p=path, v=value: _field_value(o, p) != v)
            if negate
            else (lambda o, p=path, v=value: _field_value(o, p) == v)
        )
    return lambda obj: all(test(obj) for test in tests)


def matches_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A structured LabelSelector (``matchLabels``/``matchExpressions``) against labels.

    An empty selector matches everything, as for PodDisruptionBudgets in policy/v1.
    """
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        ok = {
            "In": lambda k=key, vs=values: labels.get(k) in vs,
            "NotIn": lambda k=key, vs=values: labels.get(k) not in vs,
            "Exists": lambda k=key: k in labels,
            "DoesNotExist": lambda k=key: k not in labels,
        }[op]()
        if not ok:
            return False
    return True
