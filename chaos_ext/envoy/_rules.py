"""Edge rules as data: load, merge, compare. Pure.

A rule says where to look and what to expect::

    - id: http2-max-concurrent-streams
      title: HTTP/2 max_concurrent_streams is at most 100
      severity: high                       # critical | high | medium | low
      at: hcm:http2_protocol_options.max_concurrent_streams
      op: "<="                             # present | equals | one_of | < | <= | > | >=
      value: 100
      envoy_default: "2147483647"          # what Envoy uses when the field is absent
      why: ...

``at`` is ``scope:expression`` or a list of them (the first one found counts).
Scopes: ``bootstrap`` (the bootstrap object), ``listener`` (each audited
listener), ``hcm`` (each HTTP connection manager of each audited listener) take
a JSONPath expression (jsonpath-ng, e.g. ``actions[?name = "x"].triggers``);
``runtime`` takes a dotted runtime key of the bootstrap's static layers, where
``{listener}`` stands for the audited listener's name.

Values compare after normalisation: protobuf JSON writes 64-bit integers as
strings ("2147483648") and durations as "300s"; both compare as numbers
(durations in seconds), so ``op: ">"`` with ``value: 0s`` means "set and not
disabled".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonpath_ng import JSONPath
from jsonpath_ng.exceptions import JSONPathError
from jsonpath_ng.ext.parser import parse as jsonpath_parse

from chaos_ext.errors import InvalidArgument

__all__ = [
    "OPS",
    "SCOPES",
    "SEVERITIES",
    "Location",
    "Rule",
    "compare",
    "compiled_path",
    "default_rules",
    "effective_rules",
    "load_rules_file",
    "rules_from_data",
]

SCOPES = ("bootstrap", "runtime", "listener", "hcm")
OPS = ("present", "equals", "one_of", "<", "<=", ">", ">=")
SEVERITIES = ("critical", "high", "medium", "low")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
_DURATION = re.compile(r"^-?\d+(\.\d+)?s$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_FIELDS = {"id", "title", "severity", "at", "op", "value", "envoy_default", "why", "enabled"}
LISTENER_PLACEHOLDER = "{listener}"


@dataclass(frozen=True)
class Location:
    """Where to look: a scope and an expression within it."""

    scope: str
    expr: str

    @property
    def granularity(self) -> str:
        """``global``, ``listener`` or ``hcm``: how many times the rule is checked."""
        if self.scope == "hcm":
            return "hcm"
        if self.scope == "listener" or LISTENER_PLACEHOLDER in self.expr:
            return "listener"
        return "global"


@dataclass(frozen=True)
class Rule:
    """One edge rule (see the module docstring for the fields)."""

    id: str
    title: str
    at: tuple[Location, ...]
    op: str = "present"
    value: Any = None
    severity: str = "high"
    envoy_default: str = ""
    why: str = ""

    @property
    def granularity(self) -> str:
        return self.at[0].granularity

    @property
    def expected(self) -> str:
        """The expectation in words: ``<= 32768``, ``REJECT_REQUEST``, ``present``."""
        if self.op == "present":
            return "present"
        if self.op == "equals":
            return _show(self.value)
        if self.op == "one_of":
            return "one of " + ", ".join(_show(v) for v in self.value)
        return f"{self.op} {_show(self.value)}"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@functools.lru_cache(maxsize=512)
def compiled_path(expr: str) -> JSONPath:
    """A parsed JSONPath expression (cached: parsing costs far more than matching)."""
    try:
        return jsonpath_parse(expr)
    except (JSONPathError, Exception) as exc:  # noqa: BLE001 - ply raises plain Exceptions too
        raise InvalidArgument(f"invalid JSONPath {expr!r}: {exc}") from None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if _DURATION.match(text):
            return float(text[:-1])
        if _NUMBER.match(text):
            return float(text)
    return None


def _equal(found: Any, wanted: Any) -> bool:
    if isinstance(found, bool) or isinstance(wanted, bool):
        return found is wanted
    a, b = _number(found), _number(wanted)
    if a is not None and b is not None:
        return a == b
    return bool(found == wanted)


def compare(op: str, found: Any, wanted: Any) -> bool:
    """Does ``found`` (a dump value, never absent) satisfy ``op wanted``?"""
    if op == "present":
        return True
    if op == "equals":
        return _equal(found, wanted)
    if op == "one_of":
        return any(_equal(found, item) for item in wanted)
    a, b = _number(found), _number(wanted)
    if a is None or b is None:
        return False
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _locations(rule_id: str, at: Any) -> tuple[Location, ...]:
    items = [at] if isinstance(at, str) else at
    if not isinstance(items, list) or not items:
        raise InvalidArgument(f"rule {rule_id}: 'at' must be 'scope:expression' or a list of them")
    found: list[Location] = []
    for item in items:
        scope, sep, expr = str(item).partition(":")
        if not sep or scope not in SCOPES or not expr.strip():
            raise InvalidArgument(
                f"rule {rule_id}: 'at' {item!r} must be 'scope:expression' with scope one of "
                f"{', '.join(SCOPES)}"
            )
        location = Location(scope, expr.strip())
        if scope != "runtime":
            if LISTENER_PLACEHOLDER in location.expr:
                raise InvalidArgument(f"rule {rule_id}: {{listener}} is only for runtime keys")
            compiled_path(location.expr)
        found.append(location)
    if len({loc.granularity for loc in found}) > 1:
        raise InvalidArgument(f"rule {rule_id}: all 'at' locations must share one scope level")
    return tuple(found)


def _check_value(rule: Rule) -> None:
    if rule.op not in OPS:
        raise InvalidArgument(f"rule {rule.id}: op {rule.op!r} is not one of {', '.join(OPS)}")
    if rule.severity not in SEVERITIES:
        raise InvalidArgument(
            f"rule {rule.id}: severity {rule.severity!r} is not one of {', '.join(SEVERITIES)}"
        )
    if rule.op in ("<", "<=", ">", ">=") and _number(rule.value) is None:
        raise InvalidArgument(
            f"rule {rule.id}: op {rule.op!r} needs a number or a duration like '0s', "
            f"got {rule.value!r}"
        )
    if rule.op == "one_of" and not (isinstance(rule.value, list) and rule.value):
        raise InvalidArgument(f"rule {rule.id}: op one_of needs a non-empty list value")
    if rule.op == "equals" and rule.value is None:
        raise InvalidArgument(f"rule {rule.id}: op equals needs a value")


def _rule(data: Mapping[str, Any], base: Rule | None) -> Rule:
    rule_id = str(data.get("id", ""))
    unknown = set(data) - _FIELDS
    if unknown:
        raise InvalidArgument(
            f"rule {rule_id or '?'}: unknown field(s) {', '.join(sorted(unknown))} "
            f"(known: {', '.join(sorted(_FIELDS))})"
        )
    if base is None and not (data.get("title") and data.get("at")):
        raise InvalidArgument(f"rule {rule_id}: a new rule needs 'title' and 'at'")
    fields: dict[str, Any] = {
        k: v for k, v in data.items() if k in _FIELDS - {"at", "enabled", "id"}
    }
    for text in ("title", "severity", "envoy_default", "why", "op"):
        if text in fields:
            fields[text] = str(fields[text])
    if base is None:
        rule = Rule(id=rule_id, title=fields.pop("title"), at=_locations(rule_id, data["at"]))
        rule = replace(rule, **fields)
    else:
        rule = replace(base, **fields)
        if "at" in data:
            rule = replace(rule, at=_locations(rule_id, data["at"]))
    _check_value(rule)
    return rule


def rules_from_data(items: Any, base: Sequence[Rule] = ()) -> list[Rule]:
    """Merge rule dicts onto ``base`` by id.

    A known id updates that rule (``{"id": "listener-buffer-limit", "value": 16384}``),
    ``enabled: false`` drops it, a new id (with ``title`` and ``at``) is added.
    """
    if not isinstance(items, list):
        raise InvalidArgument(f"rules: expected a list of rule objects, got {type(items).__name__}")
    merged: dict[str, Rule] = {rule.id: rule for rule in base}
    for item in items:
        if not isinstance(item, dict) or not _ID.match(str(item.get("id", ""))):
            raise InvalidArgument(
                f"rules: each rule needs an 'id' (lowercase letters, digits, '.-_'), got {item!r}"
            )
        rule_id = str(item["id"])
        if item.get("enabled", True) is False:
            merged.pop(rule_id, None)
            continue
        merged[rule_id] = _rule(item, merged.get(rule_id))
    return list(merged.values())


def _rules_document(text: str, origin: str) -> Mapping[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"{origin}: not valid YAML: {exc}") from None
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, dict) or "rules" not in data:
        raise InvalidArgument(f"{origin}: expected a 'rules:' list (see docs/envoy.md)")
    return data


@functools.lru_cache(maxsize=1)
def _defaults() -> tuple[Rule, ...]:
    text = resources.files(__package__).joinpath("edge_rules.yaml").read_text("utf-8")
    return tuple(rules_from_data(_rules_document(text, "edge_rules.yaml")["rules"]))


def default_rules() -> list[Rule]:
    """The shipped edge rules (chaos_ext/envoy/edge_rules.yaml)."""
    return list(_defaults())


def load_rules_file(path: str, base: Sequence[Rule]) -> list[Rule]:
    """Rules from a YAML file, merged onto ``base`` unless it says ``defaults: false``."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise InvalidArgument(f"rules file {path!r}: cannot read: {exc.strerror or exc}") from None
    data = _rules_document(text, path)
    start: Sequence[Rule] = base if data.get("defaults", True) is not False else ()
    return rules_from_data(data["rules"], start)


def effective_rules(rules: Iterable[Mapping[str, Any]] | None, rules_file: str) -> list[Rule]:
    """Defaults, then the file's rules, then the ``rules`` argument's, merged by id."""
    merged = default_rules()
    if rules_file:
        merged = load_rules_file(rules_file, merged)
    if rules:
        merged = rules_from_data(list(rules), merged)
    if not merged:
        raise InvalidArgument("rules: no rule left to check")
    return merged
