"""Which Prometheus release a PromQL query needs: its newer forms, each with the version
that added it and the ``--enable-feature`` flag it needs.

The table is data (``promql_versions.json``: source, commit and licence inside), read
from Prometheus' CHANGELOG and parser sources tag by tag. Pure functions:

* :func:`forms_in` finds the table's forms in a query (functions, aggregators, and
  syntax such as ``@``, duration expressions, ``smoothed``/``anchored``, ``fill()``,
  the histogram trim operators, quoted metric names), on its text with the string
  literals masked, whether or not the offline parser can parse it;
* :func:`for_the_parser` writes the syntax the offline parser does not know as
  syntax it knows (``[1m * 2]`` -> ``[1m     ]``, ``smoothed`` -> spaces), same
  length, so that what else is in the query is still checked and positions hold;
* :func:`version_notes` says, for a target version, what is newer than it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import promql_parser

from chaos_ext.errors import InvalidArgument

__all__ = [
    "Form",
    "Target",
    "bad_duration",
    "for_the_parser",
    "forms",
    "forms_in",
    "newest",
    "parser_names",
    "promql_target",
    "version_notes",
]

Version = tuple[int, ...]
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
_MASKED = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`[^`]*`|#[^\n]*')
_CALL = re.compile(r"(?<![\w:.])([A-Za-z_]\w*)\s*\(")
_AGGREGATION = re.compile(r"(?<![\w:.])(group|limitk|limit_ratio)\s*(?:\(|by\b|without\b)")
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_OFFSET = re.compile(r"\boffset\s*", re.IGNORECASE)  # keywords: any case
_OFFSET_EXPR = re.compile(
    r"[-+]?\s*(?:\(|(?:step|range|min_of|max_of|min|max)\s*\()", re.IGNORECASE
)
_RANGE_MODIFIER = re.compile(r"(?<=[\]\}\w])(\s+)(smoothed|anchored)\b(?!\s*[({=])", re.IGNORECASE)
_DURATION_LITERAL = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|[smhdwy]))+")
_MIN_MAX = re.compile(r"(?<![\w:.])(min|max)\s*\(")
_INFO = re.compile(r"(?<![\w:.])info\s*\(")
_TRIM = re.compile(r"[<>]/")
_BRACES = re.compile(r"\{[^{}]*\}")
_QUOTED_NAME = re.compile(r'[{,]\s*"')
_LITERAL = re.compile(r"^\s*-?\s*(?:\d+(?:\.\d+)?(?:ms|[smhdwy])?)+\s*$")
_DURATION_CALLS = {
    "step": "step() in a duration",
    "range": "range() in a duration",
    "min": "min()/max() in a duration",
    "max": "min()/max() in a duration",
    "min_of": "min_of()/max_of() in a duration",
    "max_of": "min_of()/max_of() in a duration",
}
_FILL = {"fill", "fill_left", "fill_right"}
_PARSER_NAMES = {"holt_winters": "double_exponential_smoothing"}  # removed from the parser


def _version(text: str) -> Version | None:
    match = _VERSION.match(text.strip())
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def _said(version: Version) -> str:
    return ".".join(str(part) for part in version)


@dataclass(frozen=True)
class Target:
    """The Prometheus a query is for: its version and where that came from
    (``Prometheus 2.42.0+ds at http://...`` from its buildinfo, ``prometheus_version``)."""

    version: Version
    said: str

    @classmethod
    def parse(cls, text: object, said: str) -> Target | None:
        """A target from ``2.42``, ``v3.4.0``, ``2.42.0+ds``; None when it is no version."""
        version = _version(str(text)) if isinstance(text, str | int | float) else None
        return cls(version, said) if version else None


@dataclass(frozen=True)
class Form:
    """A function or syntax and the release that added it (a row of the table)."""

    name: str
    kind: str  # function | aggregator | syntax
    added: Version
    flag: str | None = None
    flag_until: Version | None = None  # the release where it no longer needs the flag
    removed: Version | None = None
    use_instead: str | None = None

    @property
    def label(self) -> str:
        return f"{self.name}()" if self.kind == "function" else self.name

    def note(self, target: Target | None) -> str | None:
        """What a query using this form should know for ``target`` (None: unknown), or None."""
        if self.removed and (target is None or target.version >= self.removed):
            parens = "()" if self.kind == "function" else ""
            instead = f": use {self.use_instead}{parens}" if self.use_instead else ""
            return f"{self.label} was removed in Prometheus {_said(self.removed)}{instead}"
        flagged = f" with --enable-feature={self.flag}" if self.flag else ""
        if self.flag and self.flag_until:
            flagged += f" (by default from {_said(self.flag_until)})"
        if target is None or target.version < self.added:
            return f"{self.label} needs Prometheus {_said(self.added)} or later{flagged}"
        if self.flag and (self.flag_until is None or target.version < self.flag_until):
            return f"{self.label} needs --enable-feature={self.flag}"
        return None


@cache
def _table() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        resources.files(__package__).joinpath("promql_versions.json").read_text()
    )
    return loaded


@cache
def forms() -> dict[str, Form]:
    """The table, by form name."""
    table: dict[str, Form] = {}
    for row in _table()["forms"]:
        until, removed = row.get("flag_until"), row.get("removed")
        table[row["form"]] = Form(
            name=row["form"],
            kind=row["kind"],
            added=_version(row["added"]) or (0,),
            flag=row.get("flag"),
            flag_until=_version(until) if until else None,
            removed=_version(removed) if removed else None,
            use_instead=row.get("use_instead"),
        )
    return table


def newest() -> str:
    """The newest Prometheus release the table was read from."""
    return str(_table()["newest"])


def _masked(expr: str) -> str:
    """``expr`` with string literals as ``"___"`` and comments as spaces, same length."""

    def blank(match: re.Match[str]) -> str:
        text = match.group(0)
        return " " * len(text) if text.startswith("#") else '"' + "_" * (len(text) - 2) + '"'

    return _MASKED.sub(blank, expr)


def _closing(text: str, start: int) -> int:
    """The index after the parenthesis that closes the one at ``start`` (-1: none)."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index + 1
    return -1


def _duration_spans(masked: str) -> Iterator[tuple[int, int]]:
    """The durations of range selectors, subqueries and offsets that are not plain
    literals (``1m * 2``, ``step()``, ``(5m)``): start and end in ``masked``."""
    for match in _BRACKETS.finditer(masked):
        start = match.start(1)
        for part in match.group(1).split(":"):
            if part.strip() and not _LITERAL.match(part):
                yield start, start + len(part)
            start += len(part) + 1
    for match in _OFFSET.finditer(masked):
        start = match.end()
        rest = masked[start:]
        call = _OFFSET_EXPR.match(rest)
        if call:
            end = _closing(masked, start + call.end() - 1)
            if end > 0:
                yield start, end


def _is_duration(text: str) -> bool:
    """A duration expression: numbers and durations, + - * / % ^, parentheses, step(),
    range(), min_of(), max_of() (keywords, in any case). Durations are read as numbers:
    the offline parser refuses ``0s`` alone."""
    try:
        numbers = _DURATION_LITERAL.sub("1", text).lower()
        node = promql_parser.parse(_MIN_MAX.sub(r"\1_of(", numbers))  # 3.6-3.12 names
    except ValueError:
        return False
    return _duration_node(node)


def _duration_node(node: object) -> bool:
    if isinstance(node, promql_parser.NumberLiteral):
        return True
    if isinstance(node, promql_parser.ParenExpr | promql_parser.UnaryExpr):
        return _duration_node(node.expr)
    if isinstance(node, promql_parser.BinaryExpr):
        arithmetic = str(node.op) in {"+", "-", "*", "/", "%", "^"}
        return arithmetic and _duration_node(node.lhs) and _duration_node(node.rhs)
    if isinstance(node, promql_parser.Call):
        duration_call = node.func.name in {"step", "range", "min_of", "max_of"}
        return duration_call and all(_duration_node(a) for a in node.args)
    return False


def forms_in(expr: str) -> list[Form]:
    """The table's forms ``expr`` uses, oldest first."""
    table, masked = forms(), _masked(expr)
    names: set[str] = set()
    durations = list(_duration_spans(masked))
    for start, end in durations:
        names.add("duration expression")
        calls = [call.lower() for call in _CALL.findall(masked[start:end])]
        names.update(_DURATION_CALLS[call] for call in calls if call in _DURATION_CALLS)
    inside = {i for start, end in durations for i in range(start, end)}
    for match in _CALL.finditer(masked):
        name = match.group(1)
        after_at = masked[: match.start()].rstrip().endswith("@")
        if match.start() in inside or (after_at and name in {"start", "end"}):
            continue
        names.add("fill" if name in _FILL else name)
    names.update(_AGGREGATION.findall(masked))
    names.update(m.group(2).lower() for m in _RANGE_MODIFIER.finditer(masked))
    if "@" in masked:
        names.add("@")
    if re.search(r"\boffset\s*-", masked, re.IGNORECASE):
        names.add("negative offset")
    if _TRIM.search(masked):
        names.add("histogram trim operator")
    if any(_QUOTED_NAME.search(braces.group(0)) for braces in _BRACES.finditer(masked)):
        names.add("quoted metric name")
    if names & set(_DURATION_CALLS.values()):  # step() etc. say it better
        names.discard("duration expression")
    found = [table[name] for name in names if name in table]
    return sorted(found, key=lambda form: (form.added, form.name))


def for_the_parser(expr: str) -> str:
    """``expr`` with what the offline parser cannot parse, but a newer Prometheus does,
    written as syntax it can: a duration expression as ``1m``, ``smoothed``/``anchored``
    removed, ``>/`` as ``>``, each padded to the same length. Anything else is kept,
    so a real syntax error stays one."""
    masked, text = _masked(expr), list(expr)
    for start, end in _duration_spans(masked):
        if _is_duration(masked[start:end]):
            text[start:end] = list("1m".ljust(end - start))
    for match in _RANGE_MODIFIER.finditer(masked):
        text[match.start(2) : match.end(2)] = list(" " * len(match.group(2)))
    for match in _TRIM.finditer(masked):
        text[match.start() + 1] = " "
    return "".join(text)


def parser_names(expr: str) -> str:
    """``expr`` for the offline parser only (positions change): the functions Prometheus
    removed named as their successors, which it knows, and a matcher added to the
    label selector of ``info()``'s second argument, which Prometheus lets match empty
    (``{data=~".*"}``) but the parser refuses as a selector."""
    masked = _masked(expr)
    edits: list[tuple[int, int, str]] = []
    for old, new in _PARSER_NAMES.items():
        for match in re.finditer(rf"(?<![\w:.]){old}(?=\s*\()", masked):
            edits.append((match.start(), match.end(), new))
    for match in _INFO.finditer(masked):
        end = _closing(masked, match.end() - 1)
        brace = re.search(r",\s*\{", masked[match.end() : end]) if end > 0 else None
        if brace:
            at = match.end() + brace.end()
            empty = masked[at:].lstrip().startswith("}")
            edits.append((at, at, 'gameday_offline="x"' + ("" if empty else ",")))
    for start, end, text in sorted(edits, reverse=True):
        expr = expr[:start] + text + expr[end:]
    return expr


def bad_duration(expr: str) -> tuple[int, str] | None:
    """The first duration of ``expr`` that is neither a literal nor a duration expression
    (``(1m * )``): its position (from 1) and text; None when there is none."""
    masked = _masked(expr)
    for start, end in _duration_spans(masked):
        if not _is_duration(masked[start:end]):
            return start + 1, expr[start:end].strip()
    return None


def version_notes(expr: str, target: Target | None) -> list[str]:
    """What in ``expr`` is newer than ``target`` (or needs a flag, or was removed), one
    note each; for an unknown target, every form of the table with its version."""
    return [note for form in forms_in(expr) if (note := form.note(target))]


def promql_target(configuration: Mapping[str, Any]) -> Target | None:
    """The target a configuration names with ``prometheus_version`` (``--var
    prometheus_version=2.42``, or the experiment's configuration), None when it names
    none; InvalidArgument when it is no version."""
    value = configuration.get("prometheus_version")
    if value is None or value == "":
        return None
    target = Target.parse(value, f"Prometheus {value} (prometheus_version)")
    if target is None:
        raise InvalidArgument(
            f"prometheus_version={value!r} is not a Prometheus version: give one such as "
            "2.42 or 3.4.0 (the Prometheus your queries run on)"
        )
    return target
