"""Pure PromQL helpers: the syntax check, label matchers and the histogram-quantile expression.

:func:`check_promql` refuses a query with a syntax error before it reaches
Prometheus: in ``gameday validate`` and in every activity when it is called.
Who judges, in this order:

1. the Prometheus that will run it, when one is known
   (:func:`validating`, e.g. ``gameday validate`` with a ``prometheus_url``): its
   own parser, through ``/api/v1/format_query``, for its version and flags;
2. offline, ``promql-parser`` (the Rust crate GreptimeDB uses), on the query with
   the syntax it does not know but a newer Prometheus accepts written as syntax
   it knows (:mod:`~chaos_ext._core.prometheus_api.promql_versions`: duration
   expressions, ``step()``, ``smoothed``/``anchored``, ``>/``); nothing a
   Prometheus release accepts is refused. What is newer than the target
   Prometheus (its buildinfo, ``prometheus_version``, else unknown) is a warning
   naming the version that added it and its feature flag. A function neither
   the parser nor the table knows is a warning too. While validating, a syntax
   error is located with ``promtool`` (Prometheus' own parser) when it is
   installed: position and token.

Error messages say which checker judged the query.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import promql_parser

from chaos_ext._core.prometheus_api import promtool
from chaos_ext._core.prometheus_api.promql_versions import (
    Target,
    bad_duration,
    for_the_parser,
    newest,
    parser_names,
    version_notes,
)
from chaos_ext._core.prometheus_api.results import shown
from chaos_ext.errors import InvalidArgument

__all__ = [
    "Judge",
    "Target",
    "Verdict",
    "check_promql",
    "histogram_quantile_expr",
    "matchers",
    "missing_metrics",
    "promql_duration",
    "quote",
    "require_metric_name",
    "validating",
]

logger = logging.getLogger(__name__)
_METRIC = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNKNOWN_FUNCTION = re.compile(r"unknown function with name '([^']+)'")

Verdict = bool | tuple[str, str] | None
"""On a query: True (valid), ``(position, reason)`` (refused), None (no verdict)."""
Judge = Callable[[str], Verdict]


@dataclass(frozen=True)
class _Checking:
    judge: tuple[str, Judge] | None
    target: Target | None


_CHECKING: ContextVar[_Checking | None] = ContextVar("gameday_promql_checking", default=None)


@contextlib.contextmanager
def validating(
    judge: tuple[str, Judge] | None = None, *, target: Target | None = None
) -> Iterator[None]:
    """Within this block (``gameday validate``/``run`` before anything runs),
    :func:`check_promql` asks ``judge`` first (``(name, judge)``, the name used in its
    messages: ``Prometheus 2.42.0 at http://...``), and locates offline syntax errors
    with promtool; what a query uses that is newer than ``target`` is a warning (no
    target: each newer form is named with its version). Outside it (an activity being
    called) only the offline parser runs: no process, no connection before the
    activity's arguments are known good, and versions are only logged at INFO."""
    token = _CHECKING.set(_Checking(judge, target))
    try:
        yield
    finally:
        _CHECKING.reset(token)


def _refused(expr: str, what: str, at: str, reason: str, judge: str) -> InvalidArgument:
    where = f"{at}, {judge}" if at else judge
    return InvalidArgument(f"{what}: invalid PromQL {shown(expr)}: {reason} ({where})")


def check_promql(expr: object, what: str = "expr") -> str:
    """``expr`` if it is a valid PromQL query, else InvalidArgument with the reason, the
    position when known and the checker (``expr: invalid PromQL 'sum(rate(x[5m]':
    unclosed left parenthesis (at char 16, promtool)``)."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidArgument(f"{what}: expected a PromQL query, got {expr!r:.60}")
    checking = _CHECKING.get()
    judge = checking.judge if checking else None
    verdict = judge[1](expr) if judge else None
    if verdict is True and judge:
        logger.info("%s: PromQL %s valid (judged by %s)", what, shown(expr), judge[0])
        return expr
    if isinstance(verdict, tuple) and judge:
        raise _refused(expr, what, verdict[0], verdict[1], f"judged by {judge[0]}")
    _check_offline(expr, what, checking)
    return expr


def _check_offline(expr: str, what: str, checking: _Checking | None) -> None:
    rewritten = for_the_parser(expr)  # newer syntax as syntax the parser knows, same length
    try:
        promql_parser.parse(parser_names(rewritten))
    except ValueError as exc:
        reason = " ".join(str(exc).split()) or "syntax error"
    else:
        _say_versions(expr, what, checking)
        return
    unknown = _UNKNOWN_FUNCTION.search(reason)
    if unknown:
        logger.warning(
            "%s: PromQL %s: function %r is unknown to the offline parser and to gameday's "
            "table of Prometheus versions; check against your Prometheus (give its "
            "prometheus_url to have it judged there)",
            what,
            shown(expr),
            unknown.group(1),
        )
        return
    bad = bad_duration(expr)
    if bad is not None:
        at, text = bad
        raise _refused(
            expr, what, f"at char {at}", f"{text!r} is not a duration expression", "offline parser"
        ) from None
    located = promtool.syntax_error(rewritten) if checking and promtool.promtool() else None
    if located is not None:  # Prometheus' own words, with the position
        raise _refused(expr, what, located[0], located[1], "promtool") from None
    raise _refused(expr, what, "", reason, "offline parser") from None


def _say_versions(expr: str, what: str, checking: _Checking | None) -> None:
    """Warn about what ``expr`` uses that is newer than the target (INFO outside
    :func:`validating`: an activity being called was validated before the run)."""
    target = checking.target if checking else None
    notes = version_notes(expr, target)
    if not notes:
        return
    about = (
        f"the target is {target.said}"
        if target
        else f"the target's version is unknown, judged for the newest ({newest()}): give "
        "prometheus_url or prometheus_version"
    )
    level = logging.WARNING if checking else logging.INFO
    logger.log(level, "%s: PromQL %s: %s; %s", what, shown(expr), "; ".join(notes), about)


def require_metric_name(value: str, what: str = "metric") -> str:
    """A valid Prometheus metric name (``http_request_duration_seconds``)."""
    if not isinstance(value, str) or not _METRIC.match(value):
        raise InvalidArgument(f"{what}={value!r} is not a Prometheus metric name")
    return value


def quote(value: str) -> str:
    """A PromQL double-quoted string literal (Go escapes, which JSON's are a subset of)."""
    return json.dumps(str(value), ensure_ascii=False)


def matchers(selector: Mapping[str, str]) -> str:
    """``{a="x",b=~"y.*"}`` from ``{"a": "x", "b": "~y.*"}`` (a leading ``~`` / ``!`` / ``!~``
    picks ``=~`` / ``!=`` / ``!~``)."""
    parts = []
    for label, raw in sorted(selector.items()):
        if not _LABEL.match(label):
            raise InvalidArgument(f"selector label {label!r} is not a Prometheus label name")
        value, op = str(raw), "="
        for prefix, operator in (("!~", "!~"), ("~", "=~"), ("!", "!=")):
            if value.startswith(prefix):
                value, op = value[len(prefix) :], operator
                break
        parts.append(f"{label}{op}{quote(value)}")
    return "{" + ",".join(parts) + "}" if parts else ""


def promql_duration(seconds: float, what: str = "window_seconds") -> str:
    """A number of seconds as a PromQL duration (``300`` -> ``300s``, ``1.5`` -> ``1500ms``)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        raise InvalidArgument(f"{what}={seconds!r} must be a number of seconds above zero")
    millis = round(seconds * 1000)
    if millis < 1:
        raise InvalidArgument(f"{what}={seconds!r} is shorter than Prometheus's 1 ms")
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def histogram_quantile_expr(
    metric: str,
    quantile: float,
    window_seconds: float,
    selector: Mapping[str, str] | None = None,
    by: Sequence[str] = (),
) -> str:
    """``histogram_quantile(q, sum by (le, ...) (rate(metric_bucket{...}[window])))``.

    ``metric`` may be given with or without its ``_bucket`` suffix.
    """
    require_metric_name(metric)
    if not 0 <= quantile <= 1:
        raise InvalidArgument(f"quantile={quantile!r} must be within [0, 1] (0.99 for p99)")
    window = promql_duration(window_seconds)
    for label in by:
        if not _LABEL.match(label) or label == "le":
            raise InvalidArgument(f"by: {label!r} is not a label name to group by")
    bucket = metric if metric.endswith("_bucket") else f"{metric}_bucket"
    grouping = ", ".join(["le", *by])
    series = f"{bucket}{matchers(selector or {})}"
    expr = f"histogram_quantile({quantile:g}, sum by ({grouping}) (rate({series}[{window}])))"
    return check_promql(expr, "histogram_quantile")


_ABSENCE = {"absent", "absent_over_time"}  # true when the series is missing


def _selector_names(node: promql_parser.VectorSelector) -> set[str]:
    names = [
        m.value
        for m in node.matchers.matchers
        if m.name == "__name__" and m.op == promql_parser.MatchOp.Equal
    ]
    return {n for n in [node.name, *names] if n}


def _operands(node: object) -> list[object]:
    """The sub-expressions that must all return series for ``node`` to return any."""
    if isinstance(node, promql_parser.MatrixSelector):
        return [node.vector_selector]
    if isinstance(node, promql_parser.Call):
        return [] if node.func.name in _ABSENCE else list(node.args)
    if isinstance(
        node,
        promql_parser.AggregateExpr
        | promql_parser.ParenExpr
        | promql_parser.UnaryExpr
        | promql_parser.SubqueryExpr,
    ):
        return [node.expr]
    return []  # literals


def _blocking(node: object, present: set[str]) -> set[str]:
    """Names whose missing series stop ``node`` from ever returning a series (empty: it
    can return some)."""
    if isinstance(node, promql_parser.VectorSelector):
        return _selector_names(node) - present
    if isinstance(node, promql_parser.BinaryExpr):
        left, right = _blocking(node.lhs, present), _blocking(node.rhs, present)
        op = str(node.op)
        if op == "or":
            return left | right if left and right else set()
        return left if op == "unless" else left | right
    return set().union(*(_blocking(part, present) for part in _operands(node)))


def missing_metrics(expr: str, present: set[str]) -> set[str]:
    """The metric names, absent from ``present``, that keep ``expr`` from ever returning
    a series (``a or b`` needs one of them; ``absent(x)`` needs none)."""
    return _blocking(promql_parser.parse(parser_names(for_the_parser(expr))), present)
