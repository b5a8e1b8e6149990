"""Abort plans: stop conditions from the catalog (the watch's bookkeeping: ``_tracker``).

An abort plan (the file given to ``gameday run --abort-on``, or the arguments of
the ``chaos_ext.controls.abort`` control)::

    interval_seconds: 1     # evaluate every condition this often while the method runs
    unreachable_after: 3    # abort when Prometheus failed this many checks in a row
    timeout_seconds: 2      # per query (default: the interval, at most 5 s)
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
    alerts:                 # alerting rules and firing alerts as stop conditions
      rules: [coredns-mixin-alerts.yaml]       # rule files / PrometheusRule manifests
      select: ["severity=critical"]            # any of these selectors (default: all)
      firing: [prometheus, alertmanager]       # alerts already firing there

A tolerance says what *steady* looks like: a condition breaches when its value
is outside it. An empty answer is "no data" (not a breach) unless the entry has
``if_empty``/``if_nan``; a query Prometheus rejects aborts at once (fail-safe).
An alert stops the run when it fires, with Prometheus's semantics (pending for
its ``for:``, ``keep_firing_for``): see
:mod:`chaos_ext._core.prometheus_api.alertstate`. A rule file or a
``PrometheusRule`` manifest is a plan by itself (``gameday run --abort-on
rules.yaml --alerts severity=critical``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from chaos_ext._core.prometheus_api.alertwatch import (
    AlertSpec,
    FiringWatch,
    parse_alerts_section,
    resolve_rules,
)
from chaos_ext._core.prometheus_api.promql import check_promql
from chaos_ext._core.prometheus_api.results import Condition
from chaos_ext._core.prometheus_api.rules import Selector, is_rule_document
from chaos_ext.errors import (
    InvalidArgument,
)
from chaos_ext.prometheus.catalogs import (
    Catalog,
    CatalogProbe,
    builtin_abort_plans,
    default_catalog,
    parse_entries,
)

__all__ = [
    "AbortCondition",
    "AbortPlan",
    "load_plan",
    "load_sources",
    "merge_plans",
    "parse_plan",
    "plan_path",
]

_T = TypeVar("_T")
_PLAN_KEYS = {
    "interval_seconds",
    "unreachable_after",
    "timeout_seconds",
    "conditions",
    "probes",
    "alerts",
}
_CONDITION_KEYS = {
    "probe",
    "parameters",
    "tolerance",
    "breaches",
    "name",
    "promql",
    "if_empty",
    "if_nan",
}


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
    alerts: AlertSpec = field(default_factory=AlertSpec)
    rule_files: tuple[Path, ...] = ()  # rule files given as plans (checked for a selection)

    @property
    def empty(self) -> bool:
        return not (self.conditions or self.alerts.rules or self.alerts.firing)

    def describe(self) -> list[dict[str, Any]]:
        return [
            *(
                {"name": c.name, "expr": c.expr, "steady": c.tolerance.describe()}
                for c in self.conditions
            ),
            *(
                {
                    "name": r.name,
                    "expr": r.expr,
                    "steady": f"not firing (for: {r.for_s:g}s)",
                    "labels": dict(r.labels),
                    "source": r.source,
                }
                for r in self.alerts.rules
            ),
            *(w.describe() for w in self.alerts.firing),
        ]


def _number(raw: Any, where: str, low: float = 1) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < low:
        raise InvalidArgument(f"{where}={raw!r} must be an integer >= {low:g}")
    return raw


def _from_catalog(spec: Mapping[str, Any], probe: CatalogProbe, where: str) -> AbortCondition:
    tolerance = probe.tolerance
    if "tolerance" in spec:
        tolerance = Condition.from_spec(spec["tolerance"], where)
    return AbortCondition(
        name=probe.name,
        expr=probe.render(spec.get("parameters") or {}),
        tolerance=tolerance,
        breaches=_number(spec.get("breaches", 1), f"{where}: breaches"),
        if_empty=probe.if_empty,
        if_nan=probe.if_nan,
    )


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
        name=str(spec.get("name") or f"condition-{index}"),
        expr=check_promql(str(spec["promql"]).strip(), f"{where}: promql"),
        tolerance=Condition.from_spec(spec["tolerance"], where),
        breaches=_number(spec.get("breaches", 1), f"{where}: breaches"),
        if_empty=_optional(spec.get("if_empty")),
        if_nan=_optional(spec.get("if_nan")),
    )


def _optional(raw: Any) -> float | None:
    return None if raw is None else float(raw)


def parse_plan(
    document: Any, source: str, catalog: Catalog | None = None, base: Path | None = None
) -> AbortPlan:
    """An :class:`AbortPlan` from a parsed YAML/JSON document (or control arguments).

    Relative rule files of the ``alerts`` section are read from ``base``.
    """
    if not isinstance(document, Mapping):
        raise InvalidArgument(f"{source}: an abort plan is a mapping with 'conditions'")
    extra = sorted(set(document) - _PLAN_KEYS)
    if extra:
        raise InvalidArgument(f"{source}: unknown key(s) {extra}; allowed: {sorted(_PLAN_KEYS)}")
    problems: list[str] = []
    book = _checked(problems, _book, document, source, catalog) or default_catalog()
    alerts = _checked(problems, parse_alerts_section, document.get("alerts"), source, base)
    conditions: Sequence[Any] = document.get("conditions") or []
    if not isinstance(conditions, list) or not (
        conditions or alerts is None or alerts.rules or alerts.firing
    ):
        problems.append(f"{source}: 'conditions' must be a non-empty list (or give alerts)")
        conditions = []
    parsed = [_checked(problems, _condition, c, i, book, source) for i, c in enumerate(conditions)]
    interval = _checked(
        problems, _seconds, document.get("interval_seconds", 1), f"{source}: interval_seconds"
    )
    timeout = document.get("timeout_seconds")
    timeout_s = (
        _checked(problems, _seconds, timeout, f"{source}: timeout_seconds")
        if (timeout is not None)
        else None
    )
    unreachable = _checked(
        problems, _number, document.get("unreachable_after", 3), f"{source}: unreachable_after"
    )
    if problems:  # every problem of the plan at once, not just the first
        raise InvalidArgument(
            problems[0]
            if len(problems) == 1
            else (f"{len(problems)} problems: " + "; ".join(problems))
        )
    assert interval is not None and unreachable is not None and alerts is not None  # noqa: S101
    return AbortPlan(
        conditions=tuple(c for c in parsed if c is not None),
        interval=interval,
        unreachable_after=unreachable,
        timeout=min(interval, 5.0) if timeout_s is None else timeout_s,
        source=source,
        alerts=alerts,
    )


def _book(document: Mapping[str, Any], source: str, catalog: Catalog | None) -> Catalog:
    book = catalog or default_catalog()
    if document.get("probes"):
        book = Catalog({**book.probes, **parse_entries(document, source)})
    return book


def _checked(problems: list[str], check: Callable[..., _T], *args: Any) -> _T | None:
    """``check(*args)``, or None with its refusal added to ``problems``."""
    try:
        return check(*args)
    except InvalidArgument as exc:
        problems.append(str(exc))
        return None


def _seconds(value: Any, where: str) -> float:
    """A plan's time setting: a number of seconds above zero (docs/conventions.md)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InvalidArgument(f"{where}: {value!r} must be a number of seconds above zero")
    return float(value)


def plan_path(text: str) -> Path:
    """The file of ``--abort-on TEXT``: a path, or the name of a built-in plan (``edge``)."""
    path = Path(text)
    builtin = builtin_abort_plans()
    if not path.exists() and text in builtin:
        return builtin[text]
    return path


def load_plan(path: Path, selectors: Sequence[Selector] = ()) -> AbortPlan:
    """Read an abort plan file (YAML or JSON), or a rule file / PrometheusRule manifest.

    ``selectors`` pick the alerts of a rule file (all of them without).
    """
    if not path.exists():
        names = ", ".join(sorted(builtin_abort_plans())) or "none"
        raise InvalidArgument(f"abort plan {path}: no such file (built-in plans: {names})")
    try:
        text = path.read_text()
        documents = [json.loads(text)] if path.suffix == ".json" else list(yaml.safe_load_all(text))
    except FileNotFoundError:
        raise InvalidArgument(f"abort plan {path}: no such file") from None
    except (OSError, ValueError, yaml.YAMLError) as exc:
        problem = " ".join(str(exc).split())
        raise InvalidArgument(f"abort plan {path}: not valid YAML/JSON: {problem}") from exc
    present = [d for d in documents if d is not None]
    if present and is_rule_document(present[0]):
        rules = resolve_rules([str(path)], selectors, None, required=False)
        return AbortPlan(
            conditions=(), source=str(path), alerts=AlertSpec(rules=rules), rule_files=(path,)
        )
    if len(present) != 1:
        raise InvalidArgument(f"abort plan {path}: expected 1 YAML document, found {len(present)}")
    return parse_plan(present[0], str(path), base=path.parent)


_KEYWORDS = {"prometheus-alerts": "prometheus", "alertmanager": "alertmanager"}


def load_sources(values: Sequence[str], selectors: Sequence[Selector]) -> AbortPlan:
    """One plan from ``--abort-on`` values (plans, rule files, built-in names, or the
    ``prometheus-alerts`` / ``alertmanager`` keywords) and ``--alerts`` selectors."""
    plans: list[AbortPlan] = []
    for value in values:
        if value in _KEYWORDS and not Path(value).exists():
            watch = FiringWatch(_KEYWORDS[value], tuple(selectors))
            plans.append(AbortPlan((), source=value, alerts=AlertSpec(firing=(watch,))))
        else:
            plans.append(load_plan(plan_path(value), selectors))
    merged = merge_plans(plans)
    if selectors and not (merged.rule_files or merged.alerts.firing):
        raise InvalidArgument(
            "--alerts selects alerts of --abort-on rule files, prometheus-alerts or "
            "alertmanager; none was given"
        )
    if merged.rule_files and not merged.alerts.rules:  # raises, naming the severities there
        resolve_rules([str(p) for p in merged.rule_files], selectors, None)
    return merged


def merge_plans(plans: Sequence[AbortPlan]) -> AbortPlan:
    """Several plans watched as one (the shortest interval and timeout win)."""
    if not plans:
        raise InvalidArgument("no abort plan given")
    return AbortPlan(
        conditions=tuple(c for p in plans for c in p.conditions),
        interval=min(p.interval for p in plans),
        unreachable_after=min(p.unreachable_after for p in plans),
        timeout=min(p.timeout for p in plans),
        source=", ".join(p.source for p in plans),
        rule_files=tuple(f for p in plans for f in p.rule_files),
        alerts=AlertSpec(
            rules=tuple(r for p in plans for r in p.alerts.rules),
            firing=tuple(w for p in plans for w in p.alerts.firing),
        ),
    )
