"""Baseline vs tuned for one metric in one window of the runs (pure; numpy + scipy).

Each side gives, per run, the samples of the metric that fell inside one window
of that run (:mod:`chaos_ext._products.report.compare` picks them). What the
samples are decides the method, and the comparison says which it used
(:attr:`Comparison.method`):

- **a time series** (several samples a run, fewer than :data:`MIN_RUNS_FOR_TEST`
  runs a side): successive samples of one run are autocorrelated, so no test
  that assumes independent samples applies and **no p-value is given**. The
  effect is the difference of the medians (all samples of a side pooled;
  the mean for true/false metrics and for mostly-zero ones whose medians are
  equal), with a **moving-block bootstrap** interval: each run is resampled in
  blocks of ``l`` successive samples (``l`` from the run's lag-1
  autocorrelation r, ``ceil((1+r)/(1-r))``, at most half the run), runs first
  when a side has several. The verdict is a change when the interval excludes
  0 *and* either the two windows' middle 90 % ranges (p5..p95) do not overlap
  or each side holds at least :data:`MIN_INDEPENDENT` independent observations
  (``n/l`` summed over the runs, with ``l`` uncapped); ``no change`` when the
  interval includes 0 with that many; else too short to tell in words;
- **independent runs** (:data:`MIN_RUNS_FOR_TEST` or more runs a side): one
  summary a run (the median of its window), the two-sided Mann-Whitney U test
  on the summaries and a bootstrap over the runs; a change needs the interval
  to exclude 0 *and* p < alpha (they disagreeing is ``inconclusive``);
- **one value a run** with fewer runs: ``direction only`` and the runs a side
  that a test would need (``--repeat N``).

A window with fewer than :data:`MIN_WINDOW_SAMPLES` samples on a side is
``too short`` (the comparison says why, in words); ``changed`` is a change
whose good direction is unknown. Every percentile here is
:func:`chaos_ext._core.percentile.percentiles` (type 7).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from chaos_ext._core.percentile import percentiles
from chaos_ext._products.report.direction import direction_of_tolerance as direction_of
from chaos_ext._products.report.resampling import (
    block_length,
    independent_count,
    interval,
    reduce_of,
    runs_replicates,
    series_replicates,
)

__all__ = [
    "MIN_INDEPENDENT",
    "MIN_RUNS_FOR_TEST",
    "MIN_WINDOW_SAMPLES",
    "Comparison",
    "Settings",
    "Summary",
    "compare_metric",
    "direction_of",
]

MIN_WINDOW_SAMPLES = 5
"""Fewer samples than this in a side's window: too short to judge."""
MIN_INDEPENDENT = 3
"""Independent observations a side needs before overlapping windows are judged."""
MIN_RUNS_FOR_TEST = 4
"""4 runs a side is the fewest whose Mann-Whitney test can reach p < 0.05 (2/70)."""
DECIDED = ("improved", "regressed", "changed")


@dataclass(frozen=True)
class Settings:
    """How to compare: significance, bootstrap size and seed, minimum relative effect."""

    alpha: float = 0.05
    resamples: int = 2000
    seed: int = 0
    min_effect: float = 0.0
    statistic: str = "auto"  # auto | median | mean


@dataclass(frozen=True)
class Summary:
    """One side's samples in the window, and the value compared (``value``)."""

    runs: int
    n: int
    median: float
    mean: float
    p05: float
    p95: float
    low: float
    high: float
    value: float = 0.0  # the statistic compared: of the samples, or of the runs' summaries


@dataclass(frozen=True)
class Comparison:
    """One metric of one experiment in one window: both sides, the effect, the verdict."""

    metric: str
    statistic: str
    baseline: Summary
    tuned: Summary
    difference: float
    ci: tuple[float, float] | None
    relative: float | None
    p_value: float | None  # None: no test of independent observations applies
    better: str | None
    better_source: str
    verdict: str
    method: str  # what the samples are and how they were compared, in words
    runs_needed: int | None = None
    note: str = ""  # why the verdict is what it is, when it is not plain
    experiment: str = ""
    window: str = ""  # "before" | "during" | "after-undo"; "" for one value a run
    source: str = ""  # where the samples came from (Prometheus, the journals)
    unit: str = ""  # "s", "ratio", "/s" ... ("" unknown)
    separated: bool = False  # the two sides' p5..p95 ranges do not overlap


def _summary(runs: Sequence[Sequence[float]], value: float) -> Summary:
    pooled = np.concatenate([np.asarray(r, dtype=float) for r in runs])
    found = percentiles(pooled.tolist(), (5, 50, 95))
    p05, p50, p95 = (float(found[q] or 0.0) for q in (5, 50, 95))
    return Summary(
        len(runs),
        int(pooled.size),
        p50,
        float(pooled.mean()),
        p05,
        p95,
        float(pooled.min()),
        float(pooled.max()),
        value,
    )


def _p_value(base: Sequence[float], tuned: Sequence[float]) -> float:
    if np.ptp(np.concatenate([base, tuned])) == 0:
        return 1.0  # every value equal: no evidence of any difference
    p = float(scipy_stats.mannwhitneyu(base, tuned, alternative="two-sided").pvalue)
    return p if math.isfinite(p) else 1.0


def _way(diff: float, better: str | None) -> str:
    if better is None:
        return "changed"
    return "improved" if (diff < 0) == (better == "lower") else "regressed"


def _change(
    diff: float, rel: float | None, better: str | None, settings: Settings
) -> tuple[str, str]:
    if diff != 0 and (rel is None or abs(rel) >= settings.min_effect):
        way = _way(diff, better)
        return way, "which way is better is unknown: set --better" if way == "changed" else ""
    return "no change", f"below the minimum effect {settings.min_effect:g}"


def _statistic(base: Summary, tuned: Summary, boolean: bool, settings: Settings) -> str:
    if settings.statistic != "auto":
        return settings.statistic
    same = base.low == base.high == tuned.low == tuned.high
    return "mean" if boolean or (base.median == tuned.median and not same) else "median"


def _separated(base: Summary, tuned: Summary) -> bool:
    return base.p95 < tuned.p05 or tuned.p95 < base.p05


def _runs_needed(diff: float, values: Sequence[float], alpha: float) -> int:
    """Runs a side for a two-sided test at ``alpha`` with 80 % power, from the run-to-run
    spread seen (normal approximation, Mann-Whitney's efficiency pi/3); at least 4,
    and 4 when the runs say nothing about their spread."""
    spread = float(np.std(values, ddof=1)) if len(values) > 2 else 0.0
    if diff == 0 or spread <= 0:
        return MIN_RUNS_FOR_TEST
    z = float(scipy_stats.norm.ppf(1 - alpha / 2) + scipy_stats.norm.ppf(0.8))
    n = 2 * (z * spread / abs(diff)) ** 2 * math.pi / 3
    return max(MIN_RUNS_FOR_TEST, min(100, math.ceil(n)))


@dataclass(frozen=True)
class _Sides:
    """What every method needs: both sides' runs, summaries, statistic and effect."""

    base: list[list[float]]
    tuned: list[list[float]]
    stat: str
    better: tuple[str | None, str]
    settings: Settings

    def summaries(self, per_run: bool) -> tuple[Summary, Summary]:
        reduce = reduce_of(self.stat)
        found = []
        for runs in (self.base, self.tuned):
            if per_run:
                value = float(np.median([reduce(r) for r in runs]))
            else:
                value = float(reduce(np.concatenate([np.asarray(r, float) for r in runs])))
            found.append(_summary(runs, value))
        return found[0], found[1]


def _result(
    metric: str, sides: _Sides, summaries: tuple[Summary, Summary], **fields: Any
) -> Comparison:
    base, tuned = summaries
    diff = tuned.value - base.value
    fields.setdefault("ci", None)
    fields.setdefault("p_value", None)
    return Comparison(
        metric=metric,
        statistic=sides.stat,
        baseline=base,
        tuned=tuned,
        difference=diff,
        relative=diff / abs(base.value) if base.value else None,
        better=sides.better[0],
        better_source=sides.better[1],
        separated=_separated(base, tuned),
        **fields,
    )


def _too_short(metric: str, sides: _Sides) -> Comparison:
    counts = [sum(map(len, runs)) for runs in (sides.base, sides.tuned)]
    short = [f"{side} {n}" for side, n in zip(("baseline", "tuned"), counts, strict=True)]
    note = (
        f"too short to judge: samples in the window: {', '.join(short)}; "
        f"{MIN_WINDOW_SAMPLES} a side are needed"
    )
    return _result(
        metric,
        sides,
        sides.summaries(False),
        verdict="too short",
        method="too few samples",
        note=note,
    )


def _series_verdict(
    c: Comparison, counts: tuple[float, float], settings: Settings
) -> tuple[str, str]:
    """The rule for time series (module docstring): interval, ranges, independent count."""
    low, high = c.ci or (0.0, 0.0)
    excludes = low > 0 or high < 0
    enough = min(counts) >= MIN_INDEPENDENT
    about = f"about {counts[0]:.1f} and {counts[1]:.1f} independent observations"
    if excludes and (c.separated or enough):
        verdict, note = _change(c.difference, c.relative, c.better, settings)
        ranges = "the windows' middle 90 % ranges do not overlap" if c.separated else ""
        return verdict, "; ".join(x for x in (ranges, note) if x)
    if excludes:
        return "inconclusive", (
            f"the interval excludes 0, but the windows overlap and hold {about} "
            f"({MIN_INDEPENDENT} a side are needed)"
        )
    if enough:
        if c.separated:
            return "inconclusive", "the ranges do not overlap, but the interval includes 0"
        return "no change", ""
    return "too short", (
        f"too short to judge: the windows overlap and hold {about}, too few to tell a change "
        "from none"
    )


def _series(metric: str, sides: _Sides) -> Comparison:
    settings = sides.settings
    rng = np.random.default_rng(settings.seed)
    replicates = series_replicates(
        sides.tuned, sides.stat, settings.resamples, rng
    ) - series_replicates(sides.base, sides.stat, settings.resamples, rng)
    runs = (len(sides.base), len(sides.tuned))
    longest = max(min(block_length(r), max(1, len(r) // 2)) for r in (*sides.base, *sides.tuned))
    method = (
        f"time series, {runs[0]} run(s) vs {runs[1]}: moving-block bootstrap "
        f"(blocks of up to {longest} sample(s){', runs resampled first' if max(runs) > 1 else ''});"
        " no p-value: successive samples are not independent"
    )
    found = _result(
        metric,
        sides,
        sides.summaries(False),
        ci=interval(replicates, settings.alpha),
        verdict="",
        method=method,
    )
    counts = (independent_count(sides.base), independent_count(sides.tuned))
    verdict, note = _series_verdict(found, counts, settings)
    return replace(found, verdict=verdict, note=note)


def _independent_runs(metric: str, sides: _Sides) -> Comparison:
    """One summary a run, several runs a side: a test of independent observations."""
    settings = sides.settings
    reduce = reduce_of(sides.stat)
    per_base = [float(reduce(r)) for r in sides.base]
    per_tuned = [float(reduce(r)) for r in sides.tuned]
    rng = np.random.default_rng(settings.seed)
    replicates = runs_replicates(per_tuned, settings.resamples, rng) - runs_replicates(
        per_base, settings.resamples, rng
    )
    ci = interval(replicates, settings.alpha)
    p = _p_value(per_base, per_tuned)
    method = (
        f"independent runs: one {sides.stat} a run, {len(per_base)} vs {len(per_tuned)}; "
        "Mann-Whitney U on them, bootstrap over the runs"
    )
    found = _result(
        metric, sides, sides.summaries(True), ci=ci, p_value=p, verdict="", method=method
    )
    by_interval, by_test = ci[0] > 0 or ci[1] < 0, p < settings.alpha
    if by_interval != by_test:
        which = "the interval excludes 0" if by_interval else f"p = {p:.3g} < {settings.alpha:g}"
        other = f"p = {p:.3g}" if by_interval else "the interval includes 0"
        note = f"the interval and the test disagree ({which}, but {other})"
        return replace(found, verdict="inconclusive", note=note)
    if not by_interval:
        return replace(found, verdict="no change")
    verdict, note = _change(found.difference, found.relative, found.better, settings)
    return replace(found, verdict=verdict, note=note)


def _direction_only(metric: str, sides: _Sides) -> Comparison:
    """One value a run and too few runs for a test: which way it moved, and the runs a
    side that would settle it."""
    values = [v for r in (*sides.base, *sides.tuned) for v in r]
    base, tuned = sides.summaries(True)
    diff = tuned.value - base.value
    needed = _runs_needed(diff, values, sides.settings.alpha)
    runs = f"{len(sides.base)} run(s) vs {len(sides.tuned)}"
    method = f"one value a run, {runs}: too few runs for a test ({MIN_RUNS_FOR_TEST} a side)"
    if diff == 0:
        note = f"no difference seen, in too few runs to say there is none; run --repeat {needed}"
        verdict = "inconclusive"
    else:
        note = (
            f"direction only: {base.value:.4g} → {tuned.value:.4g} "
            f"({_way(diff, sides.better[0])}) in {runs}; "
            f"run --repeat {needed} for a confident answer"
        )
        verdict = "direction only"
    return _result(
        metric,
        sides,
        (base, tuned),
        verdict=verdict,
        method=method,
        note=note,
        runs_needed=needed,
    )


def compare_metric(
    metric: str,
    baseline: Sequence[Sequence[float]],
    tuned: Sequence[Sequence[float]],
    better: tuple[str | None, str],
    boolean: bool = False,
    settings: Settings = Settings(),
) -> Comparison:
    """Compare one metric in one window; ``baseline``/``tuned`` hold, per run, the
    samples that fell inside the window (runs without any are left out)."""
    base_runs = [list(map(float, r)) for r in baseline if len(r)]
    tuned_runs = [list(map(float, r)) for r in tuned if len(r)]
    if not base_runs or not tuned_runs:
        raise ValueError(f"{metric}: no samples on one side")
    first = _Sides(base_runs, tuned_runs, "median", better, settings)
    stat = _statistic(*first.summaries(False), boolean, settings)
    sides = _Sides(base_runs, tuned_runs, stat, better, settings)
    one_value = all(len(r) == 1 for r in (*base_runs, *tuned_runs))
    if min(len(base_runs), len(tuned_runs)) >= MIN_RUNS_FOR_TEST:
        return _independent_runs(metric, sides)
    if one_value:
        return _direction_only(metric, sides)
    if min(sum(map(len, base_runs)), sum(map(len, tuned_runs))) < MIN_WINDOW_SAMPLES:
        return _too_short(metric, sides)
    return _series(metric, sides)
