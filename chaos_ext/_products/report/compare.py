"""Baseline vs tuned: experiments paired, their shared metrics compared, a headline (pure).

Runs are paired by experiment title (else by journal file name); each pair's
metrics are compared by name (:func:`chaos_ext._products.report.stats.compare_metric`),
with the direction from :func:`chaos_ext._products.report.direction.better_of`. The
headline says, per experiment, its verdict before and after, the hypotheses
held on each side, and the main effect in the metric's own values.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos_ext._products.report.direction import better_of
from chaos_ext._products.report.model import RunView
from chaos_ext._products.report.score import held
from chaos_ext._products.report.stats import Comparison, Settings, compare_metric

__all__ = [
    "RECOVERY_METRIC",
    "Headline",
    "MetricSamples",
    "Pairing",
    "compare_sets",
    "headlines",
    "judged",
    "metric_samples",
    "pair_experiments",
]


@dataclass
class MetricSamples:
    """One metric over a set of runs: one list of values per run."""

    runs: list[list[float]]
    boolean: bool
    tolerance: Any
    catalog_names: set[str] = dataclasses.field(default_factory=set)


@dataclass(frozen=True)
class Pairing:
    """The experiments found on both sides, and those found on one side only."""

    pairs: list[tuple[str, list[RunView], list[RunView]]]
    only_baseline: list[str]
    only_tuned: list[str]


@dataclass(frozen=True)
class Headline:
    """One experiment's answer: verdicts before/after, hypotheses held, main effect."""

    experiment: str
    before: str
    after: str
    held_before: tuple[int, int]
    held_after: tuple[int, int]
    effect: str

    def line(self) -> str:
        (hb, nb), (ha, na) = self.held_before, self.held_after
        effect = f"; {self.effect}" if self.effect else ""
        return (
            f"{self.experiment}: {self.before} → {self.after} (held {hb}/{nb} → {ha}/{na}){effect}"
        )


def judged(views: Sequence[RunView]) -> tuple[list[RunView], int]:
    """The runs a comparison may use, and how many unsteady runs were left out.

    An unsteady run injected nothing (its steady state did not hold before the
    method): its numbers describe a system that was already off, not the effect
    of a fault, so it takes no part in a before/after comparison.
    """
    kept = [v for v in views if v.outcome != "unsteady"]
    return kept, len(views) - len(kept)


def _catalog_names(view: RunView, probe: str) -> set[str]:
    """Catalog probes a check of ``probe`` calls (``catalog_probe(name=...)``)."""
    return {
        str(c.arguments["name"])
        for c in view.checks
        if c.probe == probe and isinstance(c.arguments.get("name"), str)
    }


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
            entry.catalog_names |= _catalog_names(view, series.name)
    _add_recovery(found, views)
    return found


def _stem(view: RunView) -> str:
    return re.sub(r"^journal-", "", Path(view.source).stem) if view.source else ""


def pair_experiments(baseline: Sequence[RunView], tuned: Sequence[RunView]) -> Pairing:
    """Pair runs by experiment title; titles found on one side only are paired by
    journal file name when that matches; the rest are listed as unpaired."""
    by_title: dict[str, tuple[list[RunView], list[RunView]]] = {}
    for side, views in enumerate((baseline, tuned)):
        for view in views:
            by_title.setdefault(view.title, ([], []))[side].append(view)
    pairs = [(t, b, n) for t, (b, n) in by_title.items() if b and n]
    lone_b = {t: b for t, (b, n) in by_title.items() if b and not n}
    lone_t = {t: n for t, (b, n) in by_title.items() if n and not b}
    for title_b, views_b in list(lone_b.items()):
        stems = {_stem(v) for v in views_b}
        match = next((t for t, vs in lone_t.items() if stems & {_stem(v) for v in vs}), None)
        if match is not None:
            pairs.append((f"{title_b} / {match}", views_b, lone_t.pop(match)))
            del lone_b[title_b]
    return Pairing(pairs, sorted(lone_b), sorted(lone_t))


RECOVERY_METRIC = "time-to-recover-s"
"""The seconds from the last undo to the steady state holding again, one value a run."""


def _add_recovery(metrics: dict[str, MetricSamples], views: Sequence[RunView]) -> None:
    times = [[t] for v in views if (t := v.time_to_recover_s) is not None]
    if times:
        metrics[RECOVERY_METRIC] = MetricSamples(times, False, None)


def _compare_pair(
    experiment: str,
    baseline: Sequence[RunView],
    tuned: Sequence[RunView],
    overrides: Mapping[str, str],
    settings: Settings,
) -> list[Comparison]:
    base_metrics = metric_samples(judged(baseline)[0])
    tuned_metrics = metric_samples(judged(tuned)[0])
    results = []
    for name in (n for n in base_metrics if n in tuned_metrics):
        base, new = base_metrics[name], tuned_metrics[name]
        tolerance = new.tolerance if new.tolerance is not None else base.tolerance
        better = better_of(name, tolerance, overrides, base.catalog_names | new.catalog_names)
        if name == RECOVERY_METRIC and name not in overrides:
            better = ("lower", "meaning")
        result = compare_metric(
            name, base.runs, new.runs, better, base.boolean and new.boolean, settings
        )
        results.append(dataclasses.replace(result, experiment=experiment))
    return results


def compare_sets(
    baseline: Sequence[RunView],
    tuned: Sequence[RunView],
    overrides: Mapping[str, str] | None = None,
    settings: Settings | None = None,
) -> list[Comparison]:
    """One comparison per metric present on both sides of each paired experiment."""
    pairing = pair_experiments(baseline, tuned)
    return [
        result
        for experiment, base, new in pairing.pairs
        for result in _compare_pair(experiment, base, new, overrides or {}, settings or Settings())
    ]


def _verdicts(views: Sequence[RunView]) -> str:
    outcomes = sorted({v.outcome for v in views})
    if len(views) == 1 or len(outcomes) == 1:
        return outcomes[0] if len(views) == 1 else f"{outcomes[0]} ×{len(views)}"
    return ", ".join(f"{o} {sum(v.outcome == o for v in views)}" for o in outcomes)


def _held(views: Sequence[RunView]) -> tuple[int, int]:
    counted = [v for v in views if v.outcome != "unsteady" and v.hypothesis_probes]
    return sum(held(v) for v in counted), len(counted)


def _main_effect(results: Sequence[Comparison]) -> str:
    """The metric that moved most (relative), in its own values, with its verdict."""
    moved = [c for c in results if c.difference != 0]
    if not moved:
        return ""
    top = max(moved, key=lambda c: abs(c.relative) if c.relative is not None else float("inf"))
    base = top.baseline.median if top.statistic == "median" else top.baseline.mean
    new = top.tuned.median if top.statistic == "median" else top.tuned.mean
    verdict = top.verdict
    if verdict == "direction only" and top.better is not None:
        way = "improved" if (top.difference < 0) == (top.better == "lower") else "regressed"
        verdict = f"{way}, direction only: run --repeat {top.runs_needed}"
    return f"{top.metric} {base:.4g} → {new:.4g} ({verdict})"


def headlines(
    baseline: Sequence[RunView], tuned: Sequence[RunView], results: Sequence[Comparison]
) -> list[Headline]:
    """One headline per paired experiment, in the order of the baseline."""
    found = []
    for experiment, base, new in pair_experiments(baseline, tuned).pairs:
        mine = [c for c in results if c.experiment == experiment]
        found.append(
            Headline(
                experiment,
                _verdicts(base),
                _verdicts(new),
                _held(base),
                _held(new),
                _main_effect(mine),
            )
        )
    return found
