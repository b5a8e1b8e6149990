"""Time-series charts as inline SVG strings (matplotlib, Agg/SVG backend, no pyplot).

One chart per series: the values over seconds since the experiment started
(the x axis spans the whole run), its unit on the y axis, the bands of the
run's timeline shaded (red: a fault, from injection to undo, a ledger entry or
the experiment's own actions until their rollbacks; light blue: a load
running, which is never a fault; amber: an action running), and what the
tolerance accepts as a green band (:mod:`.chart_axes`: the y range comes from
the data, not from the tolerance). Separate checks are drawn as steps (the
value holds until the next check), a single value as a marker. A comparison
chart draws the same for several runs of two sides (baseline and tuned) on one
pair of axes, each run's times taken from its own origin (:class:`Trace`).

The recovery window (:mod:`chaos_ext._products.report.recovery_window`: from
the last undo to the first check that held again, or to the end of the
recovery bound) is shaded green, grey when the run did not recover, labelled
``recovery N s`` / ``not recovered within N s``; the x axis always reaches its end.

Each shaded group has the SVG id ``<salt>-fault-<source>`` (source ``ledger``,
``actions``, ``load`` or ``action``), the tolerance band ``<salt>-tolerance``, a run
chart's line ``<salt>-line``, the recovery window
``<salt>-recovery-window`` (a comparison's: ``<salt>-recovery-window-<side>``,
one rectangle per run) and each comparison line ``<salt>-<side>-<n>``, so that
a reader (or a test) can find them.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from chaos_ext._products.report.chart_axes import legend_handles, tolerance_band, y_range
from chaos_ext._products.report.model import FaultWindow
from chaos_ext._products.report.recovery_window import RecoveryWindow
from chaos_ext._products.report.series import Series, as_number

__all__ = [
    "Trace",
    "chart_svg",
    "comparison_svg",
    "distribution_svg",
    "merged_spans",
    "tolerance_bounds",
]

_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_COLORS = {
    "ledger": ("#d62728", 0.18),
    "actions": ("#d62728", 0.18),
    "load": ("#4c78a8", 0.1),
    "action": ("#ff9f1c", 0.22),
}
_SOURCES = (
    ("load", "load running (not a fault)"),
    ("ledger", "fault on (ledger)"),
    ("actions", "fault on (actions, to the undo)"),
    ("action", "action running"),
)
_LINE = "#1f5fa8"
_BASELINE = "#7f7f7f"
# (recovered, not recovered) colours and the alpha: a run chart, then each comparison side
_RECOVERY = {
    "run": ("#2ca02c", "#5f6b7a", 0.2),
    "baseline": ("#98df8a", "#b0b0b0", 0.35),
    "tuned": ("#2ca02c", "#5f6b7a", 0.2),
}
_MIN_SPAN_S = 0.05
_JOIN = 1 / 400
_MARKERS_UP_TO = 80


def tolerance_bounds(tolerance: Any) -> list[float]:
    """Numeric bounds of a Chaos Toolkit tolerance (a number, or a range), for drawing."""
    if isinstance(tolerance, bool):
        return []
    if isinstance(tolerance, int | float):
        return [float(tolerance)]
    if isinstance(tolerance, dict) and tolerance.get("type") == "range":
        bounds = tolerance.get("range") or []
        return [b for b in (as_number(x) for x in bounds) if b is not None]
    return []


def merged_spans(
    windows: Sequence[FaultWindow], source: str, gap: float = 0.0
) -> list[tuple[float, float]]:
    """One source's windows as sorted ``(start, end)`` spans, joined when less than
    ``gap`` apart (pure)."""
    spans = sorted((w.start, max(w.end, w.start + 0.05)) for w in windows if w.source == source)
    merged: list[tuple[float, float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1] + gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


@dataclass(frozen=True)
class Trace:
    """One run's series and fault windows for a comparison chart, drawn at times
    relative to ``origin`` (epoch seconds)."""

    series: Series
    windows: tuple[FaultWindow, ...]
    origin: float
    recovery: RecoveryWindow | None = None


def _shade(
    ax: Any, windows: Sequence[FaultWindow], origin: float, width: float, gid: str
) -> list[Any]:
    """One collection per source; windows closer than 1/400 of the chart's width are
    drawn as one (indistinguishable at this size, and fast with hundreds). Returns
    the legend's proxies."""
    proxies = []
    for source, label in _SOURCES:
        spans = merged_spans(windows, source, gap=width * _JOIN)
        if not spans:
            continue
        color, alpha = _COLORS[source]
        ax.broken_barh(
            [(start - origin, end - start) for start, end in spans],
            (0, 1),
            transform=ax.get_xaxis_transform(),
            color=color,
            alpha=alpha,
            lw=0,
            gid=f"{gid}-fault-{source}",
        )
        proxies.append(Patch(color=color, alpha=alpha, label=label))
    return proxies


def _shade_recovery(
    ax: Any, windows: Sequence[RecoveryWindow], origin: float, gid: str, palette: str
) -> list[Any]:
    """The recovery windows as one collection (``gid``; its x data widen the x range, as
    the fault windows' do); returns the legend's proxy (none when there is no window)."""
    if not windows:
        return []
    good, bad, alpha = _RECOVERY[palette]
    ax.broken_barh(
        [(w.start - origin, max(w.seconds, _MIN_SPAN_S)) for w in windows],
        (0, 1),
        transform=ax.get_xaxis_transform(),
        facecolors=[good if w.recovered else bad for w in windows],
        alpha=alpha,
        lw=0,
        gid=gid,
    )
    colour = good if all(w.recovered for w in windows) else bad
    return [Patch(color=colour, alpha=alpha, label=_recovery_label(windows, palette))]


def _recovery_label(windows: Sequence[RecoveryWindow], palette: str) -> str:
    """One window's label; a comparison side's: its range of recovery times and how
    many runs did not recover."""
    if palette == "run":
        return windows[0].label
    times = sorted(w.seconds for w in windows if w.recovered)
    parts = []
    if times:
        span = f"{times[0]:g}" if times[0] == times[-1] else f"{times[0]:g}–{times[-1]:g}"
        parts.append(f"recovery {span} s")
    if failed := [w for w in windows if not w.recovered]:
        bound = max(w.seconds for w in failed)
        parts.append(f"{len(failed)} not recovered within {bound:g} s")
    return f"{palette}: " + ", ".join(parts)


def _finish(
    fig: Figure, ax: Any, title: str, xlabel: str, proxies: list[Any], ylabel: str = ""
) -> str:
    """Labels, the legend (beside the axes, each thing once) and the SVG text without
    its prologue."""
    ax.set_xlabel(xlabel, fontsize=8)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=9, loc="left")
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(
        handles=legend_handles(ax, proxies),
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0,
        frameon=False,
    )
    fig.subplots_adjust(left=0.09, right=0.74, top=0.88, bottom=0.2)
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return _PROLOGUE.sub("", buffer.getvalue(), count=1)


def _line(
    ax: Any, xs: list[float], series: Series, color: str, lw: float = 1.6, **style: Any
) -> None:
    """Separate checks as steps (each value holds until the next check), a curve's
    samples as a line, a single value as a marker alone."""
    if len(xs) == 1:
        ax.plot(xs, series.values, color=color, lw=0, marker="o", ms=6, **style)
    else:
        marker = "o" if len(xs) <= _MARKERS_UP_TO else None
        steps = series.boolean or series.discrete
        drawstyle = "steps-post" if steps else "default"
        ax.plot(xs, series.values, color=color, lw=lw, marker=marker, ms=3, ds=drawstyle, **style)
    if series.boolean:
        ax.set_yticks([0, 1], ["false", "true"])


def _width(xs: Sequence[float], windows: Sequence[FaultWindow], origin: float) -> float:
    spans = [t for w in windows for t in (w.start - origin, w.end - origin)]
    return max([*xs, *spans, 0.0]) - min([*xs, *spans, 0.0])


def chart_svg(
    series: Series,
    windows: Sequence[FaultWindow],
    origin: float,
    tolerance: Any = None,
    salt: str = "",
    abort_at: float | None = None,
    recovery: RecoveryWindow | None = None,
    *,
    unit: str = "",
    until: float | None = None,
) -> str:
    """An SVG document (no XML prologue) charting ``series``; times relative to ``origin``
    (the x axis from 0 to ``until``, the run's end, at least), in ``unit`` on the y axis,
    the recovery window shaded when there is one."""
    salt = salt or series.name
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig = Figure(figsize=(8.6, 2.4), dpi=96)
        ax = fig.add_subplot()
        xs = [t - origin for t, _ in series.points]
        proxies = _shade(ax, windows, origin, _width(xs, windows, origin), salt)
        _line(ax, xs, series, _LINE, label="_" + series.name, gid=f"{salt}-line")
        limits = (-0.1, 1.1) if series.boolean else y_range(series.values, tolerance)
        ax.set_ylim(*limits)
        proxies += tolerance_band(ax, tolerance, limits, f"{salt}-tolerance")
        if abort_at is not None:
            ax.axvline(abort_at - origin, color="#7b3fa0", lw=1.4, label="abort fired")
        windows_of_recovery = [recovery] if recovery is not None else []
        proxies += _shade_recovery(
            ax, windows_of_recovery, origin, f"{salt}-recovery-window", "run"
        )
        if until is not None:
            ax.set_xlim(left=min([0.0, *xs]), right=max([until - origin, *xs, ax.get_xlim()[1]]))
        ylabel = unit or "value (unit unknown)"
        return _finish(
            fig, ax, series.name, "seconds since the experiment started", proxies, ylabel
        )


def comparison_svg(
    metric: str,
    baseline: Sequence[Trace],
    tuned: Sequence[Trace],
    xlabel: str,
    tolerance: Any = None,
    salt: str = "",
) -> str:
    """Baseline (grey) and tuned (blue) runs of one metric on the same axes, every
    run's fault windows and recovery window shaded, each run at times relative to
    its own origin."""
    salt = salt or metric
    traces = [*baseline, *tuned]
    windows = [
        FaultWindow(w.label, w.start - t.origin, w.end - t.origin, w.source)
        for t in traces
        for w in t.windows
    ]
    xs = [p - t.origin for t in traces for p, _ in t.series.points]
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig = Figure(figsize=(8.6, 2.6), dpi=96)
        ax = fig.add_subplot()
        proxies = _shade(ax, windows, 0.0, _width(xs, windows, 0.0), salt)
        # the baseline wider and below, so that equal values still show both sides
        sides = (("baseline", baseline, _BASELINE, 3.0), ("tuned", tuned, _LINE, 1.4))
        for side, runs, color, lw in sides:
            for i, trace in enumerate(runs):
                label = f"{side} ({len(runs)} run(s))" if i == 0 else "_"
                times = [p - trace.origin for p, _ in trace.series.points]
                _line(
                    ax,
                    times,
                    trace.series,
                    color,
                    lw,
                    alpha=0.85,
                    label=label,
                    gid=f"{salt}-{side}-{i + 1}",
                )
        for bound in tolerance_bounds(tolerance):
            ax.axhline(bound, color="#555555", lw=1, ls="--", label="tolerance")
        for side, runs, _, _ in sides:
            shifted = [
                RecoveryWindow(
                    t.recovery.start - t.origin, t.recovery.seconds, t.recovery.recovered
                )
                for t in runs
                if t.recovery is not None
            ]
            proxies += _shade_recovery(ax, shifted, 0.0, f"{salt}-recovery-window-{side}", side)
        return _finish(fig, ax, metric, xlabel, proxies)


def distribution_svg(metric: str, baseline: list[float], tuned: list[float], salt: str) -> str:
    """Baseline and tuned distributions side by side (box plot over the raw samples)."""
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig = Figure(figsize=(5.6, 2.2), dpi=96)
        ax = fig.add_subplot()
        ax.boxplot([baseline, tuned], orientation="horizontal", widths=0.5, showfliers=False)
        for row, values, color in ((1, baseline, "#7f7f7f"), (2, tuned, _LINE)):
            jitter = [row + 0.18 * ((i * 37) % 11 - 5) / 5 for i in range(len(values))]
            ax.scatter(values, jitter, s=6, alpha=0.45, color=color, lw=0)
        ax.set_yticks([1, 2], ["baseline", "tuned"])
        ax.set_title(metric, fontsize=9, loc="left")
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3, axis="x")
        fig.subplots_adjust(left=0.14, right=0.98, top=0.86, bottom=0.14)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return _PROLOGUE.sub("", buffer.getvalue(), count=1)
