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
- the two-sided Mann-Whitney U p-value over the pooled samples;
- a verdict: ``improved`` / ``regressed`` when the interval excludes 0, the
  p-value is below alpha and the change is at least ``min_effect`` (relative to
  the baseline); ``no change`` otherwise; ``changed`` when the metric's good
  direction is unknown (set it with ``--better NAME=lower|higher``);
  ``inconclusive`` when a side has fewer than three samples (repeat the runs,
  or record a series with ``query_series``).

Every percentile here (p5/p95 of each side, the interval's bounds; the
median is p50) is :func:`chaos_ext._percentile.percentiles`: linear
interpolation between closest ranks, the definition the report states.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from chaos_ext._percentile import percentiles
from chaos_ext.reporting.series import as_number

__all__ = ["Comparison", "Settings", "Summary", "compare_metric", "direction_of"]

_HUGE = 1e300
MIN_SAMPLES = 3
"""Fewer samples than this on a side: the verdict is ``inconclusive``, not ``no change``."""


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


def _direction_of_range(tolerance: Mapping[str, Any]) -> str | None:
    bounds = [*(tolerance.get("range") or []), None, None]
    low, high = as_number(bounds[0]), as_number(bounds[1])
    if high is None or high >= _HUGE:
        return "higher"
    if low is None or low <= 0:
        return "lower"
    if high == 1:
        return "higher"  # a ratio that must stay near 1 (success ratio, SLO fraction)
    return None


def direction_of(tolerance: Any) -> str | None:
    """``lower`` / ``higher`` is better, read from a probe's tolerance (None: unknown).

    The tolerance bounds the probe's *output*: a range from 0 (or below) up to a
    limit, or 0, or false, says lower is better; a range open upwards, a range
    ending at 1 (a ratio), or true, says higher is better. (A probe's ``op``
    argument describes the metric it judges, not its output, so it is ignored.)
    """
    if isinstance(tolerance, bool):
        return "higher" if tolerance else "lower"
    if isinstance(tolerance, int | float):
        return "lower" if tolerance == 0 else None
    if isinstance(tolerance, Mapping) and tolerance.get("type") == "range":
        return _direction_of_range(tolerance)
    return None


def _summary(runs: Sequence[Sequence[float]]) -> Summary:
    pooled = np.concatenate([np.asarray(r, dtype=float) for r in runs])
    found = percentiles(pooled.tolist(), (5, 50, 95))
    p05, p50, p95 = (float(found[q] or 0.0) for q in (5, 50, 95))
    return Summary(
        runs=len(runs), n=int(pooled.size), median=float(p50), mean=float(pooled.mean()),
        p05=float(p05), p95=float(p95), low=float(pooled.min()), high=float(pooled.max()),
    )  # fmt: skip


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


def _verdict(diff: float, ci: tuple[float, float], p: float, rel: float | None,
             better: str | None, settings: Settings) -> str:  # fmt: skip
    significant = (ci[0] > 0 or ci[1] < 0) and p < settings.alpha
    large = rel is None or abs(rel) >= settings.min_effect
    if not (significant and large and diff != 0):
        return "no change"
    if better is None:
        return "changed"
    return "improved" if (diff < 0) == (better == "lower") else "regressed"


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
    p = _p_value(np.concatenate(base_runs), np.concatenate(tuned_runs))
    stat = settings.statistic
    if stat == "auto":
        blind = base_s.median == tuned_s.median and p < settings.alpha  # e.g. mostly zeros
        stat = "mean" if boolean or blind else "median"
    base_value = base_s.median if stat == "median" else base_s.mean
    diff = (tuned_s.median if stat == "median" else tuned_s.mean) - base_value
    rng = np.random.default_rng(settings.seed)
    replicates = _bootstrap(tuned_runs, stat, settings.resamples, rng) - _bootstrap(
        base_runs, stat, settings.resamples, rng
    )
    bounds = (100 * settings.alpha / 2, 100 * (1 - settings.alpha / 2))
    found = percentiles(replicates.tolist(), bounds)
    ci = (float(found[bounds[0]] or 0.0), float(found[bounds[1]] or 0.0))
    rel = diff / abs(base_value) if base_value else None
    verdict = _verdict(diff, ci, p, rel, better[0], settings)
    if min(base_s.n, tuned_s.n) < MIN_SAMPLES:
        verdict = "inconclusive"  # one value a side proves nothing either way
    return Comparison(
        metric, stat, base_s, tuned_s, diff, ci, rel, p, better[0], better[1], verdict
    )
