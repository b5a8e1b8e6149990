"""Pure PromQL helpers: the syntax check, label matchers and the histogram-quantile expression.

:func:`check_promql` refuses a query with a syntax error before it reaches
Prometheus: in ``gameday validate`` and in every activity when it is called.
Who judges, in this order:

1. the Prometheus that will run it, when one is known
   (:func:`validating`, e.g. ``gameday validate`` with a ``prometheus_url``): its
   own parser, through ``/api/v1/format_query``, for its version and flags;
2. offline, ``promql-parser`` (the Rust crate GreptimeDB uses), except that a
   function it does not know, duration arithmetic (``[1m * 2]``) and the
   histogram trim operators (``>/``, ``</``) are a warning naming them, not an
   error: Prometheus may well accept them. While validating, a syntax error is
   located with ``promtool`` (Prometheus' own parser) when it is installed:
   position and token.

Error messages say which checker judged the query.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar

import promql_parser

from chaos_ext._core.prometheus_api import promtool
from chaos_ext._core.prometheus_api.results import shown
from chaos_ext.errors import InvalidArgument

__all__ = [
    "Judge",
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
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_DURATION_ARITHMETIC = re.compile(r"\[[^\]]*\d[smhdwy]?\s*[-+*/%^]\s*[^\]]*\]")
_TRIM_OPERATOR = re.compile(r"[<>]/")

Verdict = bool | tuple[str, str] | None
"""On a query: True (valid), ``(position, reason)`` (refused), None (no verdict)."""
Judge = Callable[[str], Verdict]
_CHECKING: ContextVar[tuple[tuple[str, Judge] | None] | None] = ContextVar(
    "gameday_promql_checking", default=None
)


@contextlib.contextmanager
def validating(judge: tuple[str, Judge] | None = None) -> Iterator[None]:
    """Within this block (``gameday validate``/``run`` before anything runs),
    :func:`check_promql` asks ``judge`` first (``(name, judge)``, the name used in its
    messages: ``Prometheus 2.42.0 at http://...``), and locates offline syntax errors
    with promtool. Outside it (an activity being called) only the offline parser runs:
    no process, no connection before the activity's arguments are known good."""
    token = _CHECKING.set((judge,))
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
    judge = checking[0] if checking else None
    verdict = judge[1](expr) if judge else None
    if verdict is True and judge:
        logger.info("%s: PromQL %s valid (judged by %s)", what, shown(expr), judge[0])
        return expr
    if isinstance(verdict, tuple) and judge:
        raise _refused(expr, what, verdict[0], verdict[1], f"judged by {judge[0]}")
    _check_offline(expr, what, locate=checking is not None)
    return expr


def _newer_syntax(expr: str, reason: str) -> str | None:
    """What the offline parser may refuse although Prometheus accepts it, or None."""
    unknown = _UNKNOWN_FUNCTION.search(reason)
    if unknown:
        return f"function {unknown.group(1)!r}"
    bare = _STRINGS.sub('""', expr)
    if _DURATION_ARITHMETIC.search(bare):
        return "duration arithmetic"
    if _TRIM_OPERATOR.search(bare):
        return "a histogram trim operator (>/ or </)"
    return None


def _check_offline(expr: str, what: str, *, locate: bool) -> None:
    try:
        promql_parser.parse(expr)
    except ValueError as exc:
        reason = " ".join(str(exc).split()) or "syntax error"
    else:
        return
    newer = _newer_syntax(expr, reason)
    if newer is not None:
        logger.warning(
            "%s: PromQL %s: %s is unknown to the offline parser; check against your "
            "Prometheus (give its prometheus_url to have it judged there)",
            what,
            shown(expr),
            newer,
        )
        return
    located = promtool.syntax_error(expr) if locate and promtool.promtool() else None
    if located is not None:  # Prometheus' own words, with the position
        raise _refused(expr, what, located[0], located[1], "promtool") from None
    raise _refused(expr, what, "", reason, "offline parser") from None


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
    return _blocking(promql_parser.parse(expr), present)
