"""Resampling for :mod:`.stats`: block lengths, moving-block and run bootstraps (pure).

A run's samples are a time series: successive samples are autocorrelated, so
they are resampled in blocks of ``l`` successive samples, ``l`` from the run's
lag-1 autocorrelation r (``ceil((1+r)/(1-r))``, the number of samples that
count as one independent observation), at most half the run; a side with
several runs resamples its runs first. Independent runs (one summary a run)
are resampled as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from chaos_ext._core.percentile import percentiles

__all__ = [
    "block_length",
    "independent_count",
    "interval",
    "reduce_of",
    "runs_replicates",
    "series_replicates",
]


def reduce_of(stat: str) -> Any:
    """numpy's reduction for a statistic: ``median`` or ``mean``."""
    return np.median if stat == "median" else np.mean


def _lag1(values: Any) -> float:
    centred = values - values.mean()
    denominator = float(np.dot(centred, centred))
    return float(np.dot(centred[:-1], centred[1:]) / denominator) if denominator else 0.0


def block_length(run: Sequence[float]) -> int:
    """Successive samples that count as one observation: ``ceil((1+r)/(1-r))`` from the
    lag-1 autocorrelation r (1 for r <= 0, a constant run or fewer than 3 samples)."""
    values = np.asarray(run, dtype=float)
    if values.size < 3 or np.ptp(values) == 0:
        return 1
    r = min(_lag1(values), 0.999)
    return 1 if r <= 0 else min(int(values.size), math.ceil((1 + r) / (1 - r)))


def independent_count(runs: Sequence[Sequence[float]]) -> float:
    """Roughly how many independent observations the runs' samples are."""
    return sum(len(r) / block_length(r) for r in runs if len(r))


def _block_matrix(run: Sequence[float], b: int, rng: Any) -> Any:
    """``b`` moving-block resamples of one run (blocks of at most half the run)."""
    values = np.asarray(run, dtype=float)
    n = values.size
    length = max(1, min(block_length(run), n // 2))
    blocks = math.ceil(n / length)
    starts = rng.integers(0, n - length + 1, size=(b, blocks))
    index = (starts[:, :, None] + np.arange(length)).reshape(b, -1)[:, :n]
    return values[index]


def series_replicates(runs: Sequence[Sequence[float]], stat: str, b: int, rng: Any) -> Any:
    """Bootstrap replicates of the statistic: runs resampled (when several), then
    blocks within each run."""
    reduce = reduce_of(stat)
    matrices = [_block_matrix(r, b, rng) for r in runs]
    if len(matrices) == 1:
        return reduce(matrices[0], axis=1)
    chosen = rng.integers(0, len(matrices), size=(b, len(matrices)))
    return np.array(
        [reduce(np.concatenate([matrices[j][i] for j in row])) for i, row in enumerate(chosen)]
    )


def runs_replicates(values: Sequence[float], b: int, rng: Any) -> Any:
    array = np.asarray(values, dtype=float)
    return np.median(array[rng.integers(0, array.size, size=(b, array.size))], axis=1)


def interval(replicates: Any, alpha: float) -> tuple[float, float]:
    bounds = (100 * alpha / 2, 100 * (1 - alpha / 2))
    found = percentiles(replicates.tolist(), bounds)
    return float(found[bounds[0]] or 0.0), float(found[bounds[1]] or 0.0)
