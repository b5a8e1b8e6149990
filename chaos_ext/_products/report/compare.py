"""Baseline vs tuned: experiments paired, each metric compared window by window (pure).

Runs are paired by experiment title (else by journal file name). For each pair,
each metric both sides have is compared in each window of the runs' timelines
(:data:`~.windows.COMPARED_WINDOWS`: the baseline before the faults against the
other side's baseline, the fault window against the fault window, the recovery
after the undo against the recovery), with the samples that fall inside that
window (:mod:`.windows`; from Prometheus or the journal, as the sampler gives
them: :mod:`.prometheus_windows`), by :func:`~.stats.compare_metric`.
``time-to-recover-s`` (one value a run) is compared as such; a difference below
what the recovery check can resolve is no change, said so.

The headline of each experiment is :mod:`.headlines`'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from chaos_ext._core.timeline import WINDOW_PHRASES, Span
from chaos_ext._products.report.direction import better_of
from chaos_ext._products.report.model import RunView
from chaos_ext._products.report.stats import (
    MIN_WINDOW_SAMPLES,
    Comparison,
    Settings,
    compare_metric,
)
from chaos_ext._products.report.windows import (
    COMPARED_WINDOWS,
    MetricSpec,
    Run,
    Sampled,
    Sampler,
    journal_sampler,
    run_of,
    window_span,
)
from chaos_ext._runner.recovery import POLL_S

__all__ = [
    "RECOVERY_METRIC",
    "Compared",
    "Drawn",
    "Pairing",
    "Run",
    "Sampled",
    "Sampler",
    "Skipped",
    "compare_sets",
    "journal_sampler",
    "judged",
    "pair_experiments",
    "run_of",
    "shown_value",
]

RECOVERY_METRIC = "time-to-recover-s"
"""The seconds from the last undo to the steady state holding again, one value a run."""


@dataclass(frozen=True)
class Drawn:
    """One run's samples in one window, for the chart (times from ``origin``: the run's
    first fault on, else its start)."""

    experiment: str
    metric: str
    side: str  # "baseline" | "tuned"
    run: int
    window: str
    origin: float
    points: tuple[tuple[float, float], ...]
    fault_s: float | None  # how long the run's fault window lasted


@dataclass(frozen=True)
class Compared:
    """What :func:`compare_sets` found: the rows, what had nothing to compare, the charts'
    samples, and how many runs each side had per experiment."""

    rows: list[Comparison]
    skipped: list[Skipped]
    drawn: list[Drawn]
    runs: dict[str, tuple[int, int]]


def _origin(view: RunView) -> tuple[float, float | None]:
    faults = view.timeline.fault_window()
    if faults is None:
        return view.timeline.start, None
    end = faults.end if faults.end is not None else view.timeline.end
    return faults.start, end - faults.start


@dataclass(frozen=True)
class Pairing:
    """The experiments found on both sides, and those found on one side only."""

    pairs: list[tuple[str, list[Run], list[Run]]]
    only_baseline: list[str]
    only_tuned: list[str]


@dataclass(frozen=True)
class Skipped:
    """A metric in a window that has no sample on a side: named, not compared."""

    experiment: str
    metric: str
    window: str
    longest_s: float  # how long the window lasted, at most, over the runs
    lookback_s: float  # how far back each sample of the metric looks (0: not PromQL)


def judged(runs: Sequence[Run]) -> tuple[list[Run], int]:
    """The runs a comparison may use, and how many unsteady runs were left out.

    An unsteady run injected nothing (its steady state did not hold before the
    method): its numbers describe a system that was already off, not the effect
    of a fault, so it takes no part in a before/after comparison.
    """
    kept = [r for r in runs if r.view.outcome != "unsteady"]
    return kept, len(runs) - len(kept)


def _stem(view: RunView) -> str:
    return re.sub(r"^journal-", "", Path(view.source).stem) if view.source else ""


def pair_experiments(baseline: Sequence[Run], tuned: Sequence[Run]) -> Pairing:
    """Pair runs by experiment title; titles found on one side only are paired by
    journal file name when that matches; the rest are listed as unpaired."""
    by_title: dict[str, tuple[list[Run], list[Run]]] = {}
    for side, runs in enumerate((baseline, tuned)):
        for run in runs:
            by_title.setdefault(run.view.title, ([], []))[side].append(run)
    pairs = [(t, b, n) for t, (b, n) in by_title.items() if b and n]
    lone_b = {t: b for t, (b, n) in by_title.items() if b and not n}
    lone_t = {t: n for t, (b, n) in by_title.items() if n and not b}
    for title_b, runs_b in list(lone_b.items()):
        stems = {_stem(r.view) for r in runs_b}
        match = next((t for t, rs in lone_t.items() if stems & {_stem(r.view) for r in rs}), None)
        if match is not None:
            pairs.append((f"{title_b} / {match}", runs_b, lone_t.pop(match)))
            del lone_b[title_b]
    return Pairing(pairs, sorted(lone_b), sorted(lone_t))


def shown_value(value: float, unit: str) -> str:
    """A value in its unit: a ratio as a percentage, seconds with ``s``."""
    if unit == "ratio":
        return f"{100 * value:.3g} %"
    suffix = {"seconds": " s", "milliseconds": " ms", "per second": "/s", "percent": " %"}
    return f"{value:.4g}{suffix.get(unit, '')}"


@dataclass(frozen=True)
class _Context:
    experiment: str
    sampler: Sampler
    overrides: Mapping[str, str]
    settings: Settings
    drawn: list[Drawn]

    def draw(
        self, spec: MetricSpec, window: str, side: int, index: int, run: Run, got: Sampled
    ) -> None:
        origin, fault_s = _origin(run.view)
        self.drawn.append(
            Drawn(
                self.experiment,
                spec.name,
                ("baseline", "tuned")[side],
                index + 1,
                window,
                origin,
                got.points,
                fault_s,
            )
        )


def _sources(sampled: Sequence[Any]) -> str:
    found = sorted({(s.source, s.step) for s in sampled}, key=str)
    words = []
    for source, step in found:
        at = f", {step:g} s step" if step else ""
        words.append("Prometheus range query" + at if source == "prometheus" else "the journal")
    return "; ".join(dict.fromkeys(words))


def _longest(spans: Sequence[Span]) -> float:
    return max(((s.end or s.start) - s.start for s in spans), default=0.0)


def _short_words(
    spec: MetricSpec, window: str, spans: Sequence[Span], counts: Sequence[int]
) -> str:
    """Why a window is too short, in words: how long it lasted, the lookback, the samples."""
    looks = f"; each sample looks back {spec.lookback:g} s" if spec.lookback else ""
    return (
        f"the window {WINDOW_PHRASES.get(window, window)} lasted at most "
        f"{_longest(spans):.1f} s{looks}: {min(counts)} sample(s) inside it on a side, "
        f"{MIN_WINDOW_SAMPLES} needed"
    )


def _window_row(
    spec: MetricSpec, window: str, base: Sequence[Run], tuned: Sequence[Run], ctx: _Context
) -> Comparison | Skipped | None:
    sides: list[list[Sampled]] = [[], []]
    spans: list[Span] = []
    drawn: list[tuple[int, int, Run, Sampled]] = []
    for side, runs in enumerate((base, tuned)):
        for index, run in enumerate(runs):
            span = window_span(run.view, window)
            if span is not None and spec.name in run.specs:
                spans.append(span)
                got = ctx.sampler(run, run.specs[spec.name], span)
                sides[side].append(got)
                drawn.append((side, index, run, got))
    if not sides[0] or not sides[1]:
        return None  # a side has no such window (nothing injected there)
    counts = [sum(len(s.values) for s in found) for found in sides]
    if min(counts) == 0:
        return Skipped(ctx.experiment, spec.name, window, _longest(spans), spec.lookback)
    for side, index, run, got in drawn:  # a chart draws what its rows compared
        ctx.draw(spec, window, side, index, run, got)
    better = better_of(spec.name, spec.tolerance, ctx.overrides, spec.catalog_names)
    result = compare_metric(
        spec.name,
        [list(s.values) for s in sides[0]],
        [list(s.values) for s in sides[1]],
        better,
        spec.boolean,
        ctx.settings,
    )
    note = result.note
    if result.verdict == "too short" and min(counts) < MIN_WINDOW_SAMPLES:
        note = f"too short to judge: {_short_words(spec, window, spans, counts)}"
    return replace(
        result,
        experiment=ctx.experiment,
        window=window,
        source=_sources([*sides[0], *sides[1]]),
        unit=spec.unit,
        note=note,
    )


def _check_seconds(view: RunView) -> float:
    """How long one check of the hypothesis takes (its probes one after another)."""
    taken = [c.end - c.start for c in view.checks if c.start is not None and c.end is not None]
    before = [c for c in view.checks if c.phase == "before"]
    per_check = sum(c.end - c.start for c in before if c.start is not None and c.end is not None)
    return per_check or (max(taken) if taken else 0.0)


def _recovery_row(base: Sequence[Run], tuned: Sequence[Run], ctx: _Context) -> Comparison | None:
    times = [
        [[t] for r in runs if (t := r.view.time_to_recover_s) is not None] for runs in (base, tuned)
    ]
    if not times[0] or not times[1]:
        return None
    better = better_of(RECOVERY_METRIC, None, ctx.overrides)
    if RECOVERY_METRIC not in ctx.overrides:
        better = ("lower", "meaning")
    result = compare_metric(RECOVERY_METRIC, times[0], times[1], better, False, ctx.settings)
    result = replace(result, experiment=ctx.experiment, source="gameday.recovery", unit="seconds")
    resolution = max([POLL_S, *(_check_seconds(r.view) for r in (*base, *tuned))])
    if result.difference != 0 and abs(result.difference) < resolution:
        return replace(
            result,
            verdict="no change",
            note=(
                f"at the measurement's resolution: one check of the hypothesis takes "
                f"{resolution:.1f} s (polled every {POLL_S:g} s), so "
                f"{result.baseline.value:.3g} → {result.tuned.value:.3g} s is no difference it "
                "can tell"
            ),
        )
    return result


def _compare_pair(base: Sequence[Run], tuned: Sequence[Run], ctx: _Context) -> list[Any]:
    base, tuned = judged(base)[0], judged(tuned)[0]
    names: dict[str, MetricSpec] = {}
    for run in base:
        names.update({n: s for n, s in run.specs.items() if n not in names})
    shared = [s for n, s in names.items() if any(n in r.specs for r in tuned)]
    found: list[Any] = []
    for spec in shared:
        for window in COMPARED_WINDOWS:
            row = _window_row(spec, window, base, tuned, ctx)
            if row is not None:
                found.append(row)
    recovery = _recovery_row(base, tuned, ctx)
    return [*found, *([recovery] if recovery else [])]


def compare_sets(
    baseline: Sequence[Run],
    tuned: Sequence[Run],
    overrides: Mapping[str, str] | None = None,
    settings: Settings | None = None,
    sampler: Sampler = journal_sampler,
) -> Compared:
    """Per paired experiment, each shared metric in each window (module docstring), the
    metric-windows that had no sample on a side, and what the charts draw."""
    found = Compared([], [], [], {})
    for experiment, base, new in pair_experiments(baseline, tuned).pairs:
        ctx = _Context(experiment, sampler, overrides or {}, settings or Settings(), found.drawn)
        found.runs[experiment] = (len(judged(base)[0]), len(judged(new)[0]))
        for row in _compare_pair(base, new, ctx):
            (found.skipped if isinstance(row, Skipped) else found.rows).append(row)
    return found
