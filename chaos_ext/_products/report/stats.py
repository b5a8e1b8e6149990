"""Before/after statistics for tuning checks (pure; numpy + scipy).

For one metric, the baseline and tuned runs each give samples (every numeric
value the metric took in a run: before/during/after checks, method probes,
``[t, v]`` series). The comparison reports:

- the difference of the statistic (median; mean for true/false metrics, and
  for metrics whose medians are equal while Mann-Whitney finds the
  distributions differ: mostly-zero metrics such as an error ratio that is 0
  except during a fault, where the median cannot see the change),
  ``tuned - baseline``, with a bootstrap percentile confidence interval. With
  at least two runs on each side the bootstrap is hierarchical (resample runs,
  then samples within them), so run-to-run variation counts, not only
  within-run noise;
- the two-sided Mann-Whitney U p-value. Its unit is one *independent*
  observation: samples of one run are a time series, so each run is cut
  into batches of k samples, k from the run's lag-1 autocorrelation r
  (k = ceil((1+r)/(1-r)); 1 for r <= 0 and for a constant run), and each
  batch's mean is one observation (the method of batch means); the interval
  is bootstrapped from the same batch means;
- a verdict by one rule for both: ``improved`` / ``regressed`` when the
  interval excludes 0 *and* p < alpha *and* the change reaches ``min_effect``
  (relative to the baseline); ``no change`` when neither the interval nor the
  test finds a difference (or it is below ``min_effect``); ``inconclusive``
  when the interval and the test disagree (the row says so); ``changed``
  when the metric's good direction is unknown;
- ``direction only`` when a side has fewer than three independent
  observations (one run of a constant value, say): the values and which way
  they moved, and ``--repeat N``, the runs a side a test at alpha with 80 %
  power would need, estimated from the spread seen (at least 4: the fewest
  whose Mann-Whitney test can reach p < 0.05).

Every percentile here (p5/p95 of each side, the interval's bounds; the
median is p50) is :func:`chaos_ext._core.percentile.percentiles`: linear
interpolation between closest ranks, the definition the report states.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from chaos_ext._core.percentile import percentiles
from chaos_ext._products.report.direction import direction_of_tolerance as direction_of

__all__ = [
    "Comparison",
    "Settings",
    "Summary",
    "compare_metric",
    "direction_of",
    "effective_samples",
]

MIN_SAMPLES = 3
"""Fewer effective samples than this on a side: no verdict beyond the direction."""
MIN_RUNS_FOR_MANN_WHITNEY = 4
"""4 runs a side is the fewest whose Mann-Whitney test can reach p < 0.05 (2/70)."""


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
    """One side's distribution."""

    runs: int
    n: int
    median: float
    mean: float
    p05: float
    p95: float
    low: float
    high: float


@dataclass(frozen=True)
class Comparison:
    metric: str
    statistic: str
    baseline: Summary
    tuned: Summary
    difference: float
    ci: tuple[float, float]
    relative: float | None
    p_value: float
    better: str | None
    better_source: str
    verdict: str
    unit: str = "sample"  # what one observation of the test is (see effective_samples)
    runs_needed: int | None = None  # runs a side for a confident answer (estimate)
    note: str = ""  # why the verdict is what it is, when it is not plain
    experiment: str = ""  # the paired experiment's title (reporting.compare)


def _summary(runs: Sequence[Sequence[float]]) -> Summary:
    pooled = np.concatenate([np.asarray(r, dtype=float) for r in runs])
    found = percentiles(pooled.tolist(), (5, 50, 95))
    p05, p50, p95 = (float(found[q] or 0.0) for q in (5, 50, 95))
    return Summary(
        runs=len(runs),
        n=int(pooled.size),
        median=float(p50),
        mean=float(pooled.mean()),
        p05=float(p05),
        p95=float(p95),
        low=float(pooled.min()),
        high=float(pooled.max()),
    )


def _bootstrap(runs: Sequence[Sequence[float]], stat: str, b: int, rng: Any) -> Any:
    """``b`` bootstrap replicates of the statistic (hierarchical with >= 2 runs)."""
    reduce = np.median if stat == "median" else np.mean
    arrays = [np.asarray(r, dtype=float) for r in runs]
    if len(arrays) < 2:
        pooled = arrays[0]
        picks = rng.integers(0, pooled.size, size=(b, pooled.size))
        return reduce(pooled[picks], axis=1)
    out = np.empty(b)
    for i in range(b):
        chosen = rng.integers(0, len(arrays), size=len(arrays))
        parts = [arrays[j][rng.integers(0, arrays[j].size, size=arrays[j].size)] for j in chosen]
        out[i] = reduce(np.concatenate(parts))
    return out


def _p_value(base: Any, tuned: Any) -> float:
    if np.ptp(np.concatenate([base, tuned])) == 0:
        return 1.0  # every value equal: no evidence of any difference
    result = scipy_stats.mannwhitneyu(base, tuned, alternative="two-sided")
    p = float(result.pvalue)
    return p if math.isfinite(p) else 1.0


def effective_samples(run: Sequence[float]) -> tuple[list[float], int]:
    """The run's samples as roughly independent observations, and the batch size used.

    Successive samples of one run (a time series, checks a second apart) are
    autocorrelated: counting each as independent overstates the evidence.
    With lag-1 autocorrelation r, the run is cut into batches of
    k = ceil((1+r)/(1-r)) samples (1 for r <= 0, and for a constant run) and
    each batch's mean is one observation: the method of batch means, which
    keeps what every sample says (a short burst of errors too) while counting
    it as the evidence it is.
    """
    values = np.asarray(run, dtype=float)
    if values.size < 3 or np.ptp(values) == 0:
        return values.tolist(), 1  # too short to tell, or no variation: nothing depends
    centred = values - values.mean()
    r = float(np.dot(centred[:-1], centred[1:]) / np.dot(centred, centred))
    step = 1 if r <= 0 else min(int(values.size), math.ceil((1 + r) / (1 - r)))
    if step == 1:
        return values.tolist(), 1
    batches = [values[i : i + step] for i in range(0, values.size, step)]
    return [float(b.mean()) for b in batches], step


def _runs_needed(diff: float, spread: float, alpha: float) -> int:
    """Runs a side for a two-sided test at ``alpha`` with 80 % power (normal
    approximation, Mann-Whitney's efficiency pi/3), at least 4."""
    if diff == 0:
        return MIN_RUNS_FOR_MANN_WHITNEY
    if spread <= 0:
        return MIN_RUNS_FOR_MANN_WHITNEY
    z = float(scipy_stats.norm.ppf(1 - alpha / 2) + scipy_stats.norm.ppf(0.8))
    n = 2 * (z * spread / abs(diff)) ** 2 * math.pi / 3
    return max(MIN_RUNS_FOR_MANN_WHITNEY, min(1000, math.ceil(n)))


def _verdict(
    diff: float,
    ci: tuple[float, float],
    p: float,
    rel: float | None,
    better: str | None,
    settings: Settings,
) -> tuple[str, str]:
    """The one rule: a change needs the interval to exclude 0 *and* the test to give
    p < alpha *and* the estimate to reach the minimum effect; both saying no is
    ``no change``; the interval and the test disagreeing is ``inconclusive``."""
    by_interval = ci[0] > 0 or ci[1] < 0
    by_test = p < settings.alpha
    large = diff != 0 and (rel is None or abs(rel) >= settings.min_effect)
    if by_interval != by_test:
        which = "the interval excludes 0" if by_interval else f"p = {p:.3g} < {settings.alpha:g}"
        other = f"p = {p:.3g}" if by_interval else "the interval includes 0"
        return "inconclusive", f"the interval and the test disagree ({which}, but {other})"
    if not by_interval:
        return "no change", ""
    if not large:
        return "no change", f"below the minimum effect {settings.min_effect:g}"
    if better is None:
        return "changed", "which way is better is unknown: set --better"
    return ("improved" if (diff < 0) == (better == "lower") else "regressed"), ""


def _direction_only(
    diff: float,
    base: Sequence[Sequence[float]],
    tuned: Sequence[Sequence[float]],
    better: str | None,
    base_value: float,
    tuned_value: float,
    alpha: float,
) -> tuple[str, str, int]:
    """Too few independent observations for a test: say which way it moved, and how
    many runs a side would settle it (from the spread seen)."""
    per_run = [float(np.mean(r)) for r in (*base, *tuned)]
    spread = float(np.std(per_run, ddof=1)) if len(per_run) > 2 else 0.0
    if spread == 0:
        within = [np.std(r, ddof=1) for r in (*base, *tuned) if len(r) > 1]
        spread = float(np.mean(within)) if within else 0.0
    needed = _runs_needed(diff, spread, alpha)
    if diff == 0:
        return (
            "inconclusive",
            f"no difference seen, in too few runs to say there is none; run --repeat {needed}",
            needed,
        )
    way = "changed"
    if better is not None:
        way = "improved" if (diff < 0) == (better == "lower") else "regressed"
    runs = f"{len(base)} run(s) vs {len(tuned)}"
    text = (
        f"direction only: {base_value:.4g} → {tuned_value:.4g} ({way}) in {runs}; "
        f"run --repeat {needed} for a confident answer"
    )
    return "direction only", text, needed


def _thinned(runs: Sequence[Sequence[float]]) -> tuple[list[list[float]], int]:
    kept = [effective_samples(r) for r in runs]
    return [k for k, _ in kept], max(step for _, step in kept)


def compare_metric(
    metric: str,
    baseline: Sequence[Sequence[float]],
    tuned: Sequence[Sequence[float]],
    better: tuple[str | None, str],
    boolean: bool = False,
    settings: Settings = Settings(),
) -> Comparison:
    """Compare one metric; ``baseline``/``tuned`` hold one list of samples per run."""
    base_runs = [list(r) for r in baseline if len(r)]
    tuned_runs = [list(r) for r in tuned if len(r)]
    if not base_runs or not tuned_runs:
        raise ValueError(f"{metric}: no samples on one side")
    base_s, tuned_s = _summary(base_runs), _summary(tuned_runs)
    base_eff, base_step = _thinned(base_runs)
    tuned_eff, tuned_step = _thinned(tuned_runs)
    step = max(base_step, tuned_step)
    unit = (
        "sample"
        if step == 1
        else f"means of {step} samples (batch means: an autocorrelated series)"
    )
    p = _p_value(np.concatenate(base_eff), np.concatenate(tuned_eff))
    stat = settings.statistic
    if stat == "auto":
        blind = base_s.median == tuned_s.median and p < settings.alpha  # e.g. mostly zeros
        stat = "mean" if boolean or blind else "median"
    base_value = base_s.median if stat == "median" else base_s.mean
    tuned_value = tuned_s.median if stat == "median" else tuned_s.mean
    diff = tuned_value - base_value
    rng = np.random.default_rng(settings.seed)
    replicates = _bootstrap(tuned_eff, stat, settings.resamples, rng) - _bootstrap(
        base_eff, stat, settings.resamples, rng
    )
    bounds = (100 * settings.alpha / 2, 100 * (1 - settings.alpha / 2))
    found = percentiles(replicates.tolist(), bounds)
    ci = (float(found[bounds[0]] or 0.0), float(found[bounds[1]] or 0.0))
    rel = diff / abs(base_value) if base_value else None
    needed = None
    if min(sum(map(len, base_eff)), sum(map(len, tuned_eff))) < MIN_SAMPLES:
        verdict, note, needed = _direction_only(
            diff, base_runs, tuned_runs, better[0], base_value, tuned_value, settings.alpha
        )
    else:
        verdict, note = _verdict(diff, ci, p, rel, better[0], settings)
    return Comparison(
        metric,
        stat,
        base_s,
        tuned_s,
        diff,
        ci,
        rel,
        p,
        better[0],
        better[1],
        verdict,
        unit,
        needed,
        note,
    )
