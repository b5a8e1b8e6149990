"""A run's metrics window by window, as ``gameday compare`` compares them (pure).

The windows come from the run's one timeline (:mod:`chaos_ext._core.timeline`),
never from chaoslib's events: ``before`` (baseline: the run's start to the first
fault on), ``during`` (the fault window: the first fault-role ledger entry on to
the last one off) and ``after-undo`` (recovery: the last undo to the end of the
recovery). A run without a fault has ``before`` and ``no-faults`` (from the
method on).

A sample belongs to a window when what it measured lies inside it. A PromQL
value at ``t`` measures ``(t - lookback, t]``, the lookback being its longest range
selector plus its longest ``offset`` (``rate(x[5s])`` at the first second of a
fault still describes the four seconds before it); any other probe's value
measures from its start to its end. So ``rate(x[10s])`` over a 13 s fault gives 3
samples a second apart, not 13.

:func:`metric_specs` says, per metric of a run, the PromQL that gives it over
time (when there is one: the range query of :mod:`.prometheus_windows`), its
lookback, its unit and its tolerance; :func:`journal_samples` gives the values
the journal itself holds in a window (what the comparison falls back on);
a :data:`Sampler` gives a run's samples in a window (:func:`journal_sampler`,
or :class:`~.prometheus_windows.WindowSampler`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.prometheus_api.promql import histogram_quantile_expr
from chaos_ext._core.prometheus_api.results import parse_duration
from chaos_ext._core.timeline import Span, journal_vars, substitute
from chaos_ext._products.report.model import RunView, view_of
from chaos_ext._products.report.series import as_number
from chaos_ext.errors import InvalidArgument
from chaos_ext.prometheus.catalogs import default_catalog

__all__ = [
    "COMPARED_WINDOWS",
    "MetricSpec",
    "Run",
    "Sampled",
    "Sampler",
    "journal_sampler",
    "journal_samples",
    "lookback_of",
    "metric_specs",
    "run_of",
    "window_span",
]

COMPARED_WINDOWS = ("before", "during", "after-undo", "no-faults")
"""The windows compared, in order: baseline, the fault window, recovery; a run that
injected nothing has its method on instead (``no-faults``)."""
_RANGE = re.compile(r"\[\s*([0-9][0-9a-z]*)\s*(?::\s*([0-9][0-9a-z]*)?\s*)?\]")
_OFFSET = re.compile(r"\boffset\s+(-?[0-9][0-9a-z]*)")
_PROMQL_FUNCS = ("query_value", "query_series")
_PROBES = "chaos_ext.prometheus.probes"


@dataclass(frozen=True)
class MetricSpec:
    """One metric of a run: what gives it over time, and what it is."""

    name: str
    expr: str | None  # the PromQL whose range query gives the metric over time
    lookback: float  # seconds a PromQL sample looks back (0: not PromQL)
    step: float | None  # the probe's own step (query_series), when it has one
    if_nan: float | None
    if_empty: float | None
    tolerance: Any
    catalog_names: frozenset[str]
    unit: str
    boolean: bool


def lookback_of(expr: str) -> float:
    """Seconds a sample of ``expr`` looks back: its longest range (or subquery range)
    plus its longest ``offset`` (0 for an instant selector alone)."""

    def seconds(text: str) -> float:
        try:
            return parse_duration(text)
        except InvalidArgument:
            return 0.0

    ranges = [seconds(m.group(1)) for m in _RANGE.finditer(expr)]
    offsets = [seconds(m.group(1).lstrip("-")) for m in _OFFSET.finditer(expr)]
    return max(ranges, default=0.0) + max(offsets, default=0.0)


def _activities(journal: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    experiment = journal.get("experiment") or {}
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    for activity in [*(hypothesis.get("probes") or []), *(experiment.get("method") or [])]:
        if isinstance(activity, Mapping) and activity.get("type") == "probe":
            yield activity


def _recorded_expr(journal: Mapping[str, Any], name: str) -> str | None:
    """The resolved ``expr`` a query_series output carries (as the run sent it)."""
    for run in journal.get("run") or []:
        output = run.get("output") if isinstance(run, Mapping) else None
        named = (run.get("activity") or {}).get("name") == name
        if named and isinstance(output, Mapping) and isinstance(output.get("expr"), str):
            return str(output["expr"])
    return None


def _expr(journal: Mapping[str, Any], activity: Mapping[str, Any], values: Any) -> str | None:
    """The PromQL that gives the probe's value at any time, or None (not a PromQL value
    probe: a window statistic, a fraction of a window, something else)."""
    provider = activity.get("provider") or {}
    if provider.get("module") != _PROBES:
        return None
    func, arguments = provider.get("func"), provider.get("arguments") or {}
    if func in _PROMQL_FUNCS and isinstance(arguments.get("expr"), str):
        recorded = _recorded_expr(journal, str(activity.get("name")))
        return recorded or substitute(arguments["expr"], values)
    if func == "catalog_probe":
        probe = default_catalog().probes.get(str(arguments.get("name")))
        return probe.render(arguments.get("parameters") or {}) if probe else None
    if func == "histogram_quantile":
        return histogram_quantile_expr(
            str(arguments.get("metric")),
            float(arguments.get("quantile", 0.99)),
            arguments.get("window_seconds", 300),
            arguments.get("selector"),
        )
    return None


def _number(value: Any) -> float | None:
    return as_number(value) if not isinstance(value, bool) else None


def _catalog_names(activity: Mapping[str, Any]) -> frozenset[str]:
    arguments = (activity.get("provider") or {}).get("arguments") or {}
    name = arguments.get("name") if isinstance(arguments, Mapping) else None
    return frozenset({name}) if isinstance(name, str) else frozenset()


def metric_specs(journal: Mapping[str, Any], view: RunView) -> dict[str, MetricSpec]:
    """Every metric of the run (each numeric series of its view), with its PromQL when a
    probe of its name runs one."""
    values = journal_vars(journal)
    activities = {str(a.get("name")): a for a in _activities(journal)}
    found = {}
    for series in view.series:
        activity = activities.get(series.name, {})
        expr = _expr(journal, activity, values) if activity else None
        arguments = (activity.get("provider") or {}).get("arguments") or {}
        arguments = arguments if isinstance(arguments, Mapping) else {}
        found[series.name] = MetricSpec(
            name=series.name,
            expr=expr,
            lookback=lookback_of(expr) if expr else 0.0,
            step=_number(arguments.get("step_seconds")),
            if_nan=_number(arguments.get("if_nan")),
            if_empty=_number(arguments.get("if_empty")),
            tolerance=view.tolerances.get(series.name),
            catalog_names=_catalog_names(activity) if activity else frozenset(),
            unit=view.units.get(series.name, ""),
            boolean=series.boolean,
        )
    return found


def window_span(view: RunView, window: str) -> Span | None:
    """The window's span from the run's timeline (an open end: the timeline's end)."""
    timeline = view.timeline
    span = timeline.window(window)
    if span is None:
        return None
    end = span.end if span.end is not None else timeline.end
    return Span(window, span.start, max(span.start, end))


def _durations(view: RunView) -> dict[str, dict[float, float]]:
    """``{activity name: {end: start}}`` of the run's checks and method runs."""
    found: dict[str, dict[float, float]] = {}
    times = [(c.probe, c.start, c.end) for c in view.checks]
    times += [(a.name, a.start, a.end) for a in view.method]
    for name, start, end in times:
        if start is not None and end is not None:
            found.setdefault(name, {})[end] = start
    return found


def _measured_from(t: float, spec: MetricSpec, starts: Mapping[float, float], one: bool) -> float:
    """When the value at ``t`` started measuring (module docstring)."""
    if spec.expr is not None:
        return t - spec.lookback
    if not one:
        return t  # a sample of a series: a point in time
    if t in starts:
        return starts[t]
    taken = sorted(end - start for end, start in starts.items())
    return t - (taken[len(taken) // 2] if taken else 0.0)  # a recovery check: as long as most


def journal_samples(view: RunView, spec: MetricSpec, span: Span) -> list[tuple[float, float]]:
    """The ``(time, value)`` points of the metric the journal holds whose measurement lies
    in ``span``."""
    series = next((s for s in view.series if s.name == spec.name), None)
    if series is None:
        return []
    starts = _durations(view).get(spec.name, {})
    one = series.discrete
    end = span.end if span.end is not None else view.timeline.end
    return [
        (t, v)
        for t, v in series.points
        if span.start <= _measured_from(t, spec, starts, one) and t <= end
    ]


@dataclass(frozen=True)
class Run:
    """One run: its journal, its view (with its timeline) and its metrics."""

    journal: Mapping[str, Any]
    view: RunView
    specs: Mapping[str, MetricSpec]


def run_of(journal: Mapping[str, Any], source: str = "") -> Run:
    view = view_of(journal, source)
    return Run(journal, view, metric_specs(journal, view))


@dataclass(frozen=True)
class Sampled:
    """What a sampler gives: the ``(time, value)`` points and where they came from."""

    points: tuple[tuple[float, float], ...]
    source: str  # "prometheus" | "journal"
    step: float | None = None  # seconds between two samples, when known

    @property
    def values(self) -> list[float]:
        return [v for _, v in self.points]


Sampler = Callable[[Run, MetricSpec, Span], Sampled]
"""``(run, metric, window span) -> Sampled``: the metric's samples in that window."""


def journal_sampler(run: Run, spec: MetricSpec, span: Span) -> Sampled:
    """The journal's own samples in the window (no Prometheus)."""
    return Sampled(tuple(journal_samples(run.view, spec, span)), "journal")
