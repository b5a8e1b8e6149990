"""Numeric time series found in a journal's probe and action outputs.

What becomes a point, keyed by the activity's name:

- a number or a bool (1/0) returned by a probe: one point at the probe's end;
- a mapping with a numeric ``value``: one point;
- a window summary with ``p50``/``p95``/``p99`` (``query_stats``): one point in
  each of the series ``<name> p50``, ``<name> p95``, ``<name> p99``;
- a list of ``[t, v]`` pairs, directly or under ``series``/``samples``/
  ``values``/``points`` (``t`` epoch seconds or ISO 8601; ``v`` a number or a
  numeric string, as Prometheus sends): every pair;
- a Prometheus HTTP API answer (``{"data": {"result": [...]}}``): one series
  per result (``values`` of a range query, ``value`` of an instant query).

Points from the steady-state checks (before/during/after) and the method are
merged per name, one value per timestamp. A hypothesis probe whose checks have
a figure (the value its tolerance judges: ``error_ratio`` of a load probe's
mapping, a number, a bool) is charted from the run's timeline instead: one
point a check, the recovery's checks after the undo included. Such a series,
and any of one point an activity, is *discrete* (checks, drawn as steps, not
a ramp between them); a list of samples is not.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from chaos_ext._core.timeline import Timeline

__all__ = ["Series", "as_number", "pairs_of", "parse_time", "series_of", "since"]

_LIST_KEYS = ("series", "samples", "values", "points")
_STATS_KEYS = ("p50", "p95", "p99")
_MAX_LABEL = 60


@dataclass(frozen=True)
class Series:
    """One named series of ``(epoch seconds, value)`` points, sorted by time."""

    name: str
    points: tuple[tuple[float, float], ...]
    boolean: bool = False
    hypothesis: bool = False
    discrete: bool = False  # separate checks (a step between two), not samples of a curve

    @property
    def values(self) -> list[float]:
        return [v for _, v in self.points]


def as_number(value: Any) -> float | None:
    """A finite float from a number, a bool (1/0) or a numeric string; else None."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def parse_time(value: Any) -> float | None:
    """Epoch seconds from a number or an ISO 8601 timestamp (naive means UTC)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return as_number(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    return None


def _is_pair(item: Any) -> bool:
    return (isinstance(item, list | tuple) and len(item) == 2) or (
        isinstance(item, Mapping) and any(k in item for k in ("t", "time", "timestamp"))
    )


def _pair(item: Any) -> tuple[float, float] | None:
    if isinstance(item, list | tuple):
        t, v = parse_time(item[0]), as_number(item[1])
    else:
        t = parse_time(item.get("t", item.get("time", item.get("timestamp"))))
        v = as_number(item.get("v", item.get("value")))
    return (t, v) if t is not None and v is not None else None


def pairs_of(items: Any) -> list[tuple[float, float]] | None:
    """The ``[t, v]`` pairs of a list (NaN or non-numeric values dropped); None if not pairs."""
    if not isinstance(items, list) or not items or not all(_is_pair(i) for i in items):
        return None
    return [p for p in (_pair(item) for item in items) if p is not None]


def _labels(metric: Any) -> str:
    if not isinstance(metric, Mapping) or not metric:
        return ""
    text = ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
    return "{" + text[:_MAX_LABEL] + "}" if text else ""


def _prometheus(name: str, data: Mapping[str, Any]) -> Iterator[tuple[str, list[Any]]]:
    results = data.get("result")
    if not isinstance(results, list):
        return
    for result in results:
        if not isinstance(result, Mapping):
            continue
        label = name + (_labels(result.get("metric")) if len(results) > 1 else "")
        pairs = pairs_of(result.get("values")) or pairs_of([result.get("value")]) or []
        yield label, pairs


def _points(name: str, output: Any, at: float | None) -> Iterator[tuple[str, list[Any], bool]]:
    """``(series name, [(t, v)], boolean)`` found in one output."""
    if isinstance(output, bool | int | float) and not isinstance(output, str):
        value = as_number(output)
        if value is not None and at is not None:
            yield name, [(at, value)], isinstance(output, bool)
        return
    pairs = pairs_of(output)
    if pairs:
        yield name, pairs, False
        return
    if not isinstance(output, Mapping):
        return
    if isinstance(output.get("data"), Mapping):
        for label, found in _prometheus(name, output["data"]):
            yield label, found, False
        return
    for key in _LIST_KEYS:
        pairs = pairs_of(output.get(key))
        if pairs:
            yield name, pairs, False
            return
    value = output.get("value")
    if at is not None and isinstance(value, int | float | str) and as_number(value) is not None:
        yield name, [(at, as_number(value))], isinstance(value, bool)
        return
    for key in _STATS_KEYS:  # a window summary (chaos_ext.prometheus query_stats)
        stat = output.get(key)
        if at is not None and isinstance(stat, int | float) and as_number(stat) is not None:
            yield f"{name} {key}", [(at, as_number(stat))], False


def _runs(journal: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], bool]]:
    states = journal.get("steady_states") or {}
    for phase in ("before", "during", "after"):
        block = states.get(phase)
        for item in block if isinstance(block, list) else [block] if block else []:
            for run in (item or {}).get("probes") or []:
                yield run, True
    for run in journal.get("run") or []:
        yield run, False


def _figures(timeline: Timeline | None) -> dict[str, Series]:
    """The hypothesis probes charted from their figures (module docstring)."""
    found: dict[str, dict[float, float]] = {}
    booleans: dict[str, bool] = {}
    for m in timeline.measurements if timeline is not None else ():
        if m.hypothesis and m.value is not None:
            found.setdefault(m.probe, {})[m.at] = m.value
            shown = m.text.split()[-1:]
            booleans[m.probe] = booleans.get(m.probe, True) and shown in (["true"], ["false"])
    return {
        name: Series(name, tuple(sorted(points.items())), booleans[name], True, True)
        for name, points in found.items()
    }


def series_of(journal: Mapping[str, Any], timeline: Timeline | None = None) -> list[Series]:
    """Every numeric series of the journal, hypothesis probes first, by name (with the
    run's ``timeline``, a hypothesis probe's figures: module docstring)."""
    figures = _figures(timeline)
    merged: dict[str, dict[float, float]] = {}
    flags: dict[str, tuple[bool, bool, bool]] = {}
    for run, in_hypothesis in _runs(journal):
        if not isinstance(run, Mapping):
            continue
        name = str((run.get("activity") or {}).get("name", "?"))
        if in_hypothesis and name in figures:
            continue
        at = parse_time(run.get("end")) or parse_time(run.get("start"))
        for label, pairs, boolean in _points(name, run.get("output"), at):
            merged.setdefault(label, {}).update(pairs)
            was_bool, was_hyp, was_one = flags.get(label, (True, False, True))
            flags[label] = (
                was_bool and boolean,
                was_hyp or in_hypothesis,
                was_one and len(pairs) == 1,
            )
    found = [
        Series(label, tuple(sorted(points.items())), *flags[label])
        for label, points in merged.items()
        if points
    ]
    return sorted([*figures.values(), *found], key=lambda s: (not s.hypothesis, s.name))


def since(series: Series, start: float) -> tuple[Series, int]:
    """``series`` without its points before ``start`` (a range query reaching back before
    the run shows the experiment before it), and how many were cut."""
    kept = tuple(p for p in series.points if p[0] >= start)
    return Series(series.name, kept, series.boolean, series.hypothesis, series.discrete), len(
        series.points
    ) - len(kept)
