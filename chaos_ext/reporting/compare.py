"""Baseline vs tuned: the metrics two sets of journals share, compared (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos_ext.reporting.model import RunView
from chaos_ext.reporting.stats import Comparison, Settings, compare_metric, direction_of

__all__ = ["MetricSamples", "compare_sets", "judged", "metric_samples"]


@dataclass
class MetricSamples:
    """One metric over a set of runs: one list of values per run."""

    runs: list[list[float]]
    boolean: bool
    tolerance: Any


def judged(views: Sequence[RunView]) -> tuple[list[RunView], int]:
    """The runs a comparison may use, and how many unsteady runs were left out.

    An unsteady run injected nothing (its steady state did not hold before the
    method): its numbers describe a system that was already off, not the effect
    of a fault, so it takes no part in a before/after comparison.
    """
    kept = [v for v in views if v.outcome != "unsteady"]
    return kept, len(views) - len(kept)


def metric_samples(views: Sequence[RunView]) -> dict[str, MetricSamples]:
    """Every numeric series of every run, grouped by name."""
    found: dict[str, MetricSamples] = {}
    for view in views:
        for series in view.series:
            entry = found.get(series.name)
            if entry is None:
                entry = MetricSamples([], True, view.tolerances.get(series.name))
                found[series.name] = entry
            entry.runs.append(series.values)
            entry.boolean = entry.boolean and series.boolean
    return found


def _better(
    name: str, base: MetricSamples, tuned: MetricSamples, overrides: Mapping[str, str]
) -> tuple[str | None, str]:
    if name in overrides:
        return overrides[name], "--better"
    for side in (tuned, base):
        direction = direction_of(side.tolerance)
        if direction:
            return direction, "tolerance"
    return None, "unknown"


def compare_sets(
    baseline: Sequence[RunView],
    tuned: Sequence[RunView],
    overrides: Mapping[str, str] | None = None,
    settings: Settings | None = None,
) -> list[Comparison]:
    """One comparison per metric present on both sides, by name."""
    base_metrics = metric_samples(judged(baseline)[0])
    tuned_metrics = metric_samples(judged(tuned)[0])
    shared = [name for name in base_metrics if name in tuned_metrics]
    results = []
    for name in shared:
        base, new = base_metrics[name], tuned_metrics[name]
        better = _better(name, base, new, overrides or {})
        results.append(
            compare_metric(
                name,
                base.runs,
                new.runs,
                better,
                base.boolean and new.boolean,
                settings or Settings(),
            )
        )
    return results
