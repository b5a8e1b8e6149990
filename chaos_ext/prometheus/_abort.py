"""Abort plans: stop conditions from the catalog, and the pure bookkeeping of a watch.

An abort plan (the file given to ``gameday run --abort-on``, or the arguments of
the ``chaos_ext.controls.abort`` control)::

    interval: 1s            # evaluate every condition this often while the method runs
    unreachable_after: 3    # abort when Prometheus failed this many checks in a row
    timeout: 2s             # per query (default: the interval, at most 5 s)
    conditions:
      - probe: http-error-ratio          # a catalog name: its PromQL and tolerance
        parameters: {job: checkout}
      - probe: http-latency-p99
        parameters: {job: checkout}
        tolerance: {op: "<", threshold: 0.8}   # override the catalog's line
        breaches: 2                            # consecutive breaches before aborting
      - name: queue-depth                      # or a condition of its own
        promql: max(queue_depth{queue="orders"})
        tolerance: {op: "<", threshold: 1000}
    probes: {...}           # optional catalog entries local to this file

A tolerance says what *steady* looks like: a condition breaches when its value
is outside it. An empty answer is "no data" (not a breach) unless the entry has
``if_empty``/``if_nan``; a query Prometheus rejects aborts at once (fail-safe).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from chaos_ext.errors import (
    EmptyResult,
    InvalidArgument,
    PrometheusHTTPError,
    PrometheusUnreachable,
)
from chaos_ext.prometheus._catalog import (
    Catalog,
    CatalogProbe,
    builtin_abort_plans,
    default_catalog,
    parse_entries,
)
from chaos_ext.prometheus._results import Condition, parse_duration

__all__ = [
    "AbortCondition", "AbortPlan", "Tracker", "Verdict", "load_plan", "parse_plan", "plan_path",
]  # fmt: skip

_PLAN_KEYS = {"interval", "unreachable_after", "timeout", "conditions", "probes"}
_CONDITION_KEYS = {
    "probe", "parameters", "tolerance", "breaches", "name", "promql", "if_empty", "if_nan",
}  # fmt: skip


@dataclass(frozen=True)
class AbortCondition:
    """One stop condition: breach when the value leaves ``tolerance``."""

    name: str
    expr: str
    tolerance: Condition
    breaches: int = 1
    if_empty: float | None = None
    if_nan: float | None = None


@dataclass(frozen=True)
class AbortPlan:
    """What to watch, how often, and when Prometheus itself counts as gone."""

    conditions: tuple[AbortCondition, ...]
    interval: float = 1.0
    unreachable_after: int = 3
    timeout: float = 1.0
    source: str = ""

    def describe(self) -> list[dict[str, Any]]:
        return [
            {"name": c.name, "expr": c.expr, "steady": c.tolerance.describe()}
            for c in self.conditions
        ]


@dataclass(frozen=True)
class Verdict:
    """Why the watch fired."""

    reason: str  # breach | unreachable | error
    condition: str
    detail: str
    value: float | None = None
    at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason, "condition": self.condition, "detail": self.detail,
            "value": self.value, "at_unix": round(self.at, 3),
        }  # fmt: skip


def _number(raw: Any, where: str, low: float = 1) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < low:
        raise InvalidArgument(f"{where}={raw!r} must be an integer >= {low:g}")
    return raw


def _from_catalog(spec: Mapping[str, Any], probe: CatalogProbe, where: str) -> AbortCondition:
    tolerance = probe.tolerance
    if "tolerance" in spec:
        tolerance = Condition.from_spec(spec["tolerance"], where)
    return AbortCondition(
        name=probe.name, expr=probe.render(spec.get("parameters") or {}), tolerance=tolerance,
        breaches=_number(spec.get("breaches", 1), f"{where}: breaches"),
        if_empty=probe.if_empty, if_nan=probe.if_nan,
    )  # fmt: skip


def _condition(spec: Any, index: int, catalog: Catalog, source: str) -> AbortCondition:
    where = f"{source}: conditions[{index}]"
    if not isinstance(spec, Mapping):
        raise InvalidArgument(f"{where} must be a mapping with 'probe' or 'promql'")
    extra = sorted(set(spec) - _CONDITION_KEYS)
    if extra:
        raise InvalidArgument(f"{where}: unknown key(s) {extra}")
    if "probe" in spec:
        return _from_catalog(spec, catalog.get(str(spec["probe"])), where)
    if not spec.get("promql") or "tolerance" not in spec:
        raise InvalidArgument(f"{where}: give 'probe' (a catalog name) or 'promql' + 'tolerance'")
    return AbortCondition(
        name=str(spec.get("name") or f"condition-{index}"), expr=str(spec["promql"]).strip(),
        tolerance=Condition.from_spec(spec["tolerance"], where),
        breaches=_number(spec.get("breaches", 1), f"{where}: breaches"),
        if_empty=_optional(spec.get("if_empty")), if_nan=_optional(spec.get("if_nan")),
    )  # fmt: skip


def _optional(raw: Any) -> float | None:
    return None if raw is None else float(raw)


def parse_plan(document: Any, source: str, catalog: Catalog | None = None) -> AbortPlan:
    """An :class:`AbortPlan` from a parsed YAML/JSON document (or control arguments)."""
    if not isinstance(document, Mapping):
        raise InvalidArgument(f"{source}: an abort plan is a mapping with 'conditions'")
    extra = sorted(set(document) - _PLAN_KEYS)
    if extra:
        raise InvalidArgument(f"{source}: unknown key(s) {extra}; allowed: {sorted(_PLAN_KEYS)}")
    book = catalog or default_catalog()
    if document.get("probes"):
        book = Catalog({**book.probes, **parse_entries(document, source)})
    conditions: Sequence[Any] = document.get("conditions") or []
    if not isinstance(conditions, list) or not conditions:
        raise InvalidArgument(f"{source}: 'conditions' must be a non-empty list")
    interval = parse_duration(document.get("interval", "1s"), f"{source}: interval")
    timeout = document.get("timeout")
    return AbortPlan(
        conditions=tuple(_condition(c, i, book, source) for i, c in enumerate(conditions)),
        interval=interval,
        unreachable_after=_number(document.get("unreachable_after", 3), "unreachable_after"),
        timeout=min(interval, 5.0) if timeout is None else parse_duration(timeout, "timeout"),
        source=source,
    )


def plan_path(text: str) -> Path:
    """The file of ``--abort-on TEXT``: a path, or the name of a built-in plan (``edge``)."""
    path = Path(text)
    builtin = builtin_abort_plans()
    if not path.exists() and text in builtin:
        return builtin[text]
    return path


def load_plan(path: Path) -> AbortPlan:
    """Read an abort plan file (YAML or JSON)."""
    if not path.exists():
        names = ", ".join(sorted(builtin_abort_plans())) or "none"
        raise InvalidArgument(f"abort plan {path}: no such file (built-in plans: {names})")
    try:
        text = path.read_text()
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise InvalidArgument(f"abort plan {path}: {exc}") from exc
    return parse_plan(document, str(path))


@dataclass
class Tracker:
    """Counts consecutive breaches and unreachable checks; says when to abort."""

    plan: AbortPlan
    checks: int = 0
    no_data: int = 0
    unreachable_streak: int = 0
    streaks: dict[str, int] = field(default_factory=dict)
    last: dict[str, float | None] = field(default_factory=dict)

    def tick(self, outcomes: Sequence[tuple[AbortCondition, float | Exception]], now: float
             ) -> Verdict | None:  # fmt: skip
        """Feed one round of results (a value or the error per condition).

        A query Prometheus rejects (or any other error) aborts at once: the run
        would otherwise go on unprotected.
        """
        self.checks += 1
        unreachable: list[str] = []
        for condition, outcome in outcomes:
            verdict = self._one(condition, outcome, now, unreachable)
            if verdict is not None:
                return verdict
        self.unreachable_streak = self.unreachable_streak + 1 if unreachable else 0
        if self.unreachable_streak >= self.plan.unreachable_after:
            return Verdict(
                "unreachable", "prometheus",
                f"{self.unreachable_streak} checks in a row failed: {unreachable[0]}", at=now,
            )  # fmt: skip
        return None

    def _one(
        self, condition: AbortCondition, outcome: float | Exception, now: float,
        unreachable: list[str],
    ) -> Verdict | None:  # fmt: skip
        if isinstance(outcome, EmptyResult):
            self.no_data += 1
            self.last[condition.name] = None
            return None
        if isinstance(outcome, PrometheusUnreachable | PrometheusHTTPError):
            unreachable.append(str(outcome))  # no usable answer (down, 5xx, auth): fail-safe
            return None
        if isinstance(outcome, Exception):
            return Verdict("error", condition.name, str(outcome), at=now)
        self.last[condition.name] = outcome
        if condition.tolerance.holds(outcome):
            self.streaks[condition.name] = 0
            return None
        streak = self.streaks.get(condition.name, 0) + 1
        self.streaks[condition.name] = streak
        if streak < condition.breaches:
            return None
        return Verdict(
            "breach", condition.name,
            f"{outcome:g} is not {condition.tolerance.describe()} ({condition.expr})",
            value=outcome, at=now,
        )  # fmt: skip
