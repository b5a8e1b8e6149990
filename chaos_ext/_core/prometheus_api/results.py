"""Pure evaluation of Prometheus answers: numbers, statistics, SLO verdicts.

Nothing here does I/O. Inputs are the ``result`` part of Prometheus's query
API answers (as prometheus-api-client returns them); outputs are floats, dicts
and booleans that Chaos Toolkit tolerances compare directly.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.percentile import percentiles
from chaos_ext.errors import EmptyResult, InvalidArgument, PrometheusError

__all__ = [
    "AGGREGATES",
    "OPERATORS",
    "Condition",
    "Sample",
    "Series",
    "aggregate",
    "fraction_holding",
    "parse_duration",
    "parse_instant",
    "parse_range",
    "shown",
    "single_value",
    "summarize",
]

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


@dataclass(frozen=True)
class Sample:
    """One instant-vector element."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    """One range-vector element: ``(unix time, value)`` points."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Condition:
    """``value <op> threshold``, or ``low <= value <= high`` for a range."""

    op: str
    threshold: float
    high: float | None = None

    def __post_init__(self) -> None:
        if self.op not in OPERATORS and self.op != "between":
            raise InvalidArgument(f"op {self.op!r} is not one of {[*OPERATORS, 'between']}")
        if self.op == "between" and (self.high is None or self.high < self.threshold):
            raise InvalidArgument(f"range [{self.threshold}, {self.high}] needs low <= high")

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], where: str) -> Condition:
        """``{op: "<", threshold: 0.01}`` or ``{range: [low, high]}`` (YAML/JSON form)."""
        try:
            if "range" in spec:
                low, high = (float(v) for v in spec["range"])
                return cls("between", low, high)
            return cls(str(spec["op"]), float(spec["threshold"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(
                f"{where}: tolerance {dict(spec)!r} must be {{op, threshold}} "
                "or {range: [lo, hi]}"
            ) from exc

    def holds(self, value: float) -> bool:
        """True when ``value`` satisfies the condition (NaN never does)."""
        if math.isnan(value):
            return False
        if self.op == "between":
            return self.threshold <= value <= (self.high if self.high is not None else math.inf)
        return OPERATORS[self.op](value, self.threshold)

    def describe(self) -> str:
        if self.op == "between":
            return f"in [{self.threshold:g}, {self.high:g}]"
        return f"{self.op} {self.threshold:g}"


def shown(expr: str) -> str:
    """An expression quoted on one line, for messages."""
    return repr(" ".join(expr.split()))


def parse_duration(text: str | float | int, what: str = "duration") -> float:
    """Seconds in a Prometheus duration (``90s``, ``1m30s``, ``500ms``) or a number."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        raw = str(text).strip()
        parts = _DURATION.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise InvalidArgument(f"{what}={text!r} is not a duration like 30s, 5m or 1h30m")
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise InvalidArgument(f"{what}={text!r} must be longer than zero")
    return seconds


def _float(raw: Any) -> float:
    return float(raw)  # Prometheus sends "NaN", "+Inf", "-Inf", "0.25": float() parses them all


def parse_instant(result: Any, expr: str) -> list[Sample]:
    """Samples of an instant query answer (vector or scalar)."""
    if isinstance(result, list) and len(result) == 2 and not isinstance(result[0], dict):
        try:
            return [Sample({}, _float(result[1]))]  # scalar: [time, "value"]
        except ValueError as exc:
            raise PrometheusError(f"{shown(expr)} returned a string, not a number") from exc
    samples: list[Sample] = []
    for element in result or []:
        if "values" in element:
            raise PrometheusError(
                f"{shown(expr)} returns a range vector; use query_stats/slo_holds for windows"
            )
        samples.append(Sample(dict(element.get("metric") or {}), _float(element["value"][1])))
    return samples


def parse_range(result: Any, expr: str) -> list[Series]:
    """Series of a range query answer (matrix)."""
    series: list[Series] = []
    for element in result or []:
        if "values" not in element:
            raise PrometheusError(f"{shown(expr)}: expected a matrix from query_range")
        points = tuple((float(t), _float(v)) for t, v in element["values"])
        series.append(Series(dict(element.get("metric") or {}), points))
    return series


AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "sum": math.fsum,
    "max": max,
    "min": min,
    "mean": lambda values: math.fsum(values) / len(values),
}


def aggregate(values: Sequence[float], how: str, expr: str, count: int) -> float:
    """One number from several series: ``single`` refuses more than one."""
    if how == "single":
        if count > 1:
            raise PrometheusError(
                f"{shown(expr)} returned {count} series where one was expected; aggregate in "
                "PromQL (sum(...), max(...)) or pass aggregate=sum|max|min|mean"
            )
        return values[0]
    if how not in AGGREGATES:
        raise InvalidArgument(f"aggregate={how!r} is not one of single, {', '.join(AGGREGATES)}")
    return AGGREGATES[how](values)


def single_value(
    samples: Sequence[Sample],
    expr: str,
    *,
    how: str = "single",
    if_empty: float | None = None,
    if_nan: float | None = None,
) -> float:
    """The value of an instant answer; empty and NaN are explicit (default: an error)."""
    if not samples:
        if if_empty is None:
            raise EmptyResult(
                f"{shown(expr)} returned no series; check the selector, or pass if_empty=<value>"
            )
        return if_empty
    value = aggregate([s.value for s in samples], how, expr, len(samples))
    if math.isnan(value):
        if if_nan is None:
            raise EmptyResult(
                f"{shown(expr)} is NaN (e.g. 0/0 with no traffic); pass if_nan=<value>"
            )
        return if_nan
    return value


def summarize(values: Sequence[float]) -> dict[str, float]:
    """min/max/mean/p50/p95/p99/count of the non-NaN values (NaN when there are none).

    Percentiles are :func:`chaos_ext._core.percentile.percentiles` (linear
    interpolation, as PromQL's ``quantile_over_time`` computes them).
    """
    clean = [v for v in values if not math.isnan(v)]
    if not clean:
        return dict.fromkeys(("min", "max", "mean", "p50", "p95", "p99"), math.nan) | {"count": 0}
    found = percentiles(clean, (50, 95, 99))
    return {
        "min": min(clean),
        "max": max(clean),
        "mean": math.fsum(clean) / len(clean),
        **{f"p{q:g}": float(v if v is not None else math.nan) for q, v in found.items()},
        "count": len(clean),
    }


def fraction_holding(values: Sequence[float], condition: Condition, expected: int) -> float:
    """Share of the ``expected`` sample slots in which the condition held.

    Missing slots (no data) and NaN samples count as not holding: an SLO cannot
    be proved by silence.
    """
    if expected <= 0:
        raise InvalidArgument("the window holds no sample slot; make step smaller than window")
    held = sum(1 for v in values if condition.holds(v))
    return min(held, expected) / expected
