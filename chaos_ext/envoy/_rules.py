"""Audit rules as data: load, merge, compare. Pure.

A rule says where to look, what to expect, where the expectation comes from
and how to fix it::

    - id: http2-max-concurrent-streams
      title: HTTP/2 max_concurrent_streams is at most 100
      severity: high                       # critical | high | medium | low
      at: hcm:http2_protocol_options.max_concurrent_streams
      op: "<="                             # present | equals | one_of | < | <= | > | >= | loopback
      value: 100
      envoy_default: "2147483647"          # what Envoy uses when the field is absent
      when_absent: fail                    # fail | pass (Envoy's default already complies)
      why: ...
      source: {doc: ..., section: ..., url: ...}
      fix: {hcm: {http2_protocol_options: {max_concurrent_streams: 100}}}

``at`` is ``scope:expression`` or a list of them (the first one found counts).
Scopes: ``bootstrap`` (the bootstrap object), ``listener`` (each audited
listener), ``hcm`` (each HTTP connection manager of each audited listener),
``cluster`` (each upstream cluster; one aggregated verdict), ``route`` (the
``RouteAction`` of each route of the audited HTTP connection managers' route
configurations, inline or from RDS; one aggregated verdict, the failing routes
named) take a JSONPath expression (jsonpath-ng, e.g. ``actions[?name = "x"].triggers``); ``runtime``
takes a dotted runtime key of the bootstrap's static layers, where
``{listener}`` stands for the audited listener's name (``unnamed_listener:
warn | fail`` says what an unnamed listener gets: Envoy names it with a
generated UUID, so no runtime key can address it).

Values compare after normalisation: protobuf JSON writes 64-bit integers as
strings ("2147483648") and durations as "300s" (older dumps as
``{"seconds": 300}``); both compare as numbers (durations in seconds), so
``op: ">"`` with ``value: 0s`` means "set and not disabled". A value that the
op cannot interpret (a list where a number is expected) is *unreadable*, not
a pass or a fail. ``loopback`` passes an address (``core.v3.Address``) that is
a unix socket (``pipe``) or a loopback IP.

Route rules may also say ``exempt_routes`` (fnmatch patterns of route labels,
``<route config> / <virtual host> / <route name or match>``: long-lived and
streaming routes that legitimately disable a timeout) and ``unless`` (a
condition ``{at, op, value}`` on ``route:`` or ``hcm:`` locations, the first
found counting: a route that fails the rule but meets it passes, e.g. a
request timeout disabled but a ``max_stream_duration`` set). Any rule may say
``on_fail: warn``: a non-compliant target is a warning, not a failure (a
finding to review, which does not fail the audit), and ``by_hand``: what to do
by hand when the rule has no ``fix``.

``fix`` is what the fix writers set (:mod:`._fix`): ``hcm``/``listener``/
``cluster`` fields, ``bootstrap`` fields, or ``runtime`` keys.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jsonpath_ng import JSONPath
from jsonpath_ng.exceptions import JSONPathError
from jsonpath_ng.ext.parser import parse as jsonpath_parse

from chaos_ext.errors import InvalidArgument

__all__ = [
    "LISTENER_PLACEHOLDER",
    "OPS",
    "SCOPES",
    "SEVERITIES",
    "Condition",
    "Location",
    "Rule",
    "compare",
    "compiled_path",
    "rules_from_data",
]

SCOPES = ("bootstrap", "runtime", "listener", "hcm", "cluster", "route")
OPS = ("present", "equals", "one_of", "<", "<=", ">", ">=", "loopback")
SEVERITIES = ("critical", "high", "medium", "low")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
_DURATION = re.compile(r"^-?\d+(\.\d+)?s$")
_PLAIN = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_FIELDS = {
    "id",
    "title",
    "severity",
    "at",
    "op",
    "value",
    "envoy_default",
    "why",
    "enabled",
    "source",
    "fix",
    "when_absent",
    "unnamed_listener",
    "exempt_routes",
    "unless",
    "on_fail",
    "by_hand",
}
_FIX_KEYS = {"bootstrap", "runtime", "listener", "hcm", "cluster"}
LISTENER_PLACEHOLDER = "{listener}"


@dataclass(frozen=True)
class Location:
    """Where to look: a scope and an expression within it."""

    scope: str
    expr: str

    @property
    def granularity(self) -> str:
        """``global``, ``listener``, ``hcm``, ``cluster`` or ``route``: what it is checked on."""
        if self.scope in ("hcm", "cluster", "route"):
            return self.scope
        if self.scope == "listener" or LISTENER_PLACEHOLDER in self.expr:
            return "listener"
        return "global"


@dataclass(frozen=True)
class Condition:
    """A route rule's ``unless``: where to look (first found counts), op, value."""

    at: tuple[Location, ...]
    op: str
    value: Any

    @property
    def expected(self) -> str:
        return f"{self.op} {_show(self.value)}"


@dataclass(frozen=True)
class Rule:
    """One rule (see the module docstring for the fields)."""

    id: str
    title: str
    at: tuple[Location, ...]
    op: str = "present"
    value: Any = None
    severity: str = "high"
    envoy_default: str = ""
    why: str = ""
    source: Any = None
    fix: Any = None
    when_absent: str = "fail"
    unnamed_listener: str = "warn"
    exempt_routes: tuple[str, ...] = ()
    unless: Condition | None = None
    on_fail: str = "fail"
    by_hand: str = ""

    @property
    def granularity(self) -> str:
        return self.at[0].granularity

    @property
    def expected(self) -> str:
        """The expectation in words: ``<= 32768``, ``REJECT_REQUEST``, ``present``."""
        text = self._expected()
        if self.unless is None:
            return text
        fields = dict.fromkeys(loc.expr.rsplit(".", 1)[-1] for loc in self.unless.at)
        return f"{text}, or {' / '.join(fields)} {self.unless.expected}"

    def _expected(self) -> str:
        if self.op in ("present", "loopback"):
            return "loopback address or unix socket" if self.op == "loopback" else "present"
        if self.op == "equals":
            return _show(self.value)
        if self.op == "one_of":
            return "one of " + ", ".join(_show(v) for v in self.value)
        return f"{self.op} {_show(self.value)}"

    @property
    def cites(self) -> str:
        """The source in one line: ``doc, section (url)``."""
        src = self.source
        if not isinstance(src, dict):
            return str(src or "")
        text = ", ".join(str(src[k]) for k in ("doc", "section") if src.get(k))
        return f"{text} ({src['url']})" if src.get("url") else text


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
    if isinstance(value, dict) and value and set(value) <= {"seconds", "nanos"}:
        seconds, nanos = _number(value.get("seconds", 0)), _number(value.get("nanos", 0))
        if seconds is not None and nanos is not None:
            return seconds + nanos / 1e9  # an older dump's Duration object
    return None


def _equal(found: Any, wanted: Any) -> bool:
    if isinstance(found, bool) or isinstance(wanted, bool):
        return found is wanted
    a, b = _number(found), _number(wanted)
    if a is not None and b is not None:
        return a == b
    return bool(found == wanted)


def _loopback(found: Any) -> bool | None:
    if not isinstance(found, dict):
        return None
    if isinstance(found.get("pipe"), dict):
        return True
    address = (found.get("socket_address") or {}).get("address")
    if not isinstance(address, str):
        return None
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a host name: reachable from wherever it resolves


def compare(op: str, found: Any, wanted: Any) -> bool | None:
    """Does ``found`` (an input value, never absent) satisfy ``op wanted``?

    None: ``found`` is of a kind the op cannot interpret (unreadable).
    """
    if op == "present":
        return True
    if op == "loopback":
        return _loopback(found)
    scalar = isinstance(found, str | int | float | bool)
    if op == "equals":
        return _equal(found, wanted) if scalar else None
    if op == "one_of":
        return any(_equal(found, item) for item in wanted) if scalar else None
    a, b = _number(found), _number(wanted)
    if a is None or b is None:
        return None
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _locations(rule_id: str, at: Any, *, mixed: bool = False) -> tuple[Location, ...]:
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
    if not mixed and len({loc.granularity for loc in found}) > 1:
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
    choices = (
        ("when_absent", ("fail", "pass")),
        ("unnamed_listener", ("warn", "fail")),
        ("on_fail", ("fail", "warn")),
    )
    for name, allowed in choices:
        if getattr(rule, name) not in allowed:
            raise InvalidArgument(
                f"rule {rule.id}: {name} {getattr(rule, name)!r} is not one of {', '.join(allowed)}"
            )
    if (rule.exempt_routes or rule.unless) and rule.granularity != "route":
        raise InvalidArgument(f"rule {rule.id}: exempt_routes and unless are for route: rules")
    if rule.fix is not None and not (isinstance(rule.fix, dict) and set(rule.fix) <= _FIX_KEYS):
        raise InvalidArgument(
            f"rule {rule.id}: fix must be a mapping with keys among {', '.join(sorted(_FIX_KEYS))}"
        )


def _exempt(rule_id: str, items: Any) -> tuple[str, ...]:
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise InvalidArgument(
            f"rule {rule_id}: exempt_routes must be a list of route label patterns like "
            f"'http.8080 / * / prefix /events*', got {items!r}"
        )
    return tuple(items)


def _condition(rule_id: str, data: Any) -> Condition | None:
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"at", "op", "value"}:
        raise InvalidArgument(f"rule {rule_id}: unless must be a mapping of at, op and value")
    at = _locations(rule_id, data["at"], mixed=True)
    if any(loc.scope not in ("route", "hcm") or not _PLAIN.match(loc.expr) for loc in at):
        raise InvalidArgument(
            f"rule {rule_id}: unless looks only at route: or hcm: plain dotted paths"
        )
    op = str(data["op"])
    if op not in ("<", "<=", ">", ">=") or _number(data["value"]) is None:
        raise InvalidArgument(
            f"rule {rule_id}: unless needs op <, <=, > or >= and a number or duration value"
        )
    return Condition(at, op, data["value"])


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
    for text in (
        "title",
        "severity",
        "envoy_default",
        "why",
        "op",
        "when_absent",
        "unnamed_listener",
        "on_fail",
        "by_hand",
    ):
        if text in fields:
            fields[text] = str(fields[text])
    if "exempt_routes" in fields:
        fields["exempt_routes"] = _exempt(rule_id, fields["exempt_routes"])
    if "unless" in fields:
        fields["unless"] = _condition(rule_id, fields["unless"])
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
