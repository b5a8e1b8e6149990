"""Time-series charts as inline SVG strings (matplotlib, Agg/SVG backend, no pyplot).

One chart per series: the values over seconds since the experiment started,
fault windows shaded (red: a fault recorded in the ledger, from injection to
undo; amber: an action running), and the tolerance bounds as dashed lines when
the tolerance is numeric.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from chaos_ext._products.report.model import FaultWindow
from chaos_ext._products.report.series import Series, as_number

__all__ = [
    "chart_svg",
    "distribution_svg",
    "merged_spans",
    "tolerance_bounds",
]

_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_COLORS = {"ledger": ("#d62728", 0.18), "action": ("#ff9f1c", 0.22)}
_LINE = "#1f5fa8"
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


def _shade(ax: Any, windows: Sequence[FaultWindow], origin: float, width: float) -> list[Any]:
    """One collection per source; windows closer than 1/400 of the chart's width are
    drawn as one (indistinguishable at this size, and fast with hundreds). Returns
    the legend's proxies."""
    proxies = []
    for source, label in (("ledger", "fault (ledger)"), ("action", "action running")):
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
        )
        proxies.append(Patch(color=color, alpha=alpha, label=label))
    return proxies


def chart_svg(
    series: Series,
    windows: Sequence[FaultWindow],
    origin: float,
    tolerance: Any = None,
    salt: str = "",
    abort_at: float | None = None,
) -> str:
    """An SVG document (no XML prologue) charting ``series``; times relative to ``origin``."""
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt or series.name}):
        fig = Figure(figsize=(8.6, 2.4), dpi=96)
        ax = fig.add_subplot()
        xs = [t - origin for t, _ in series.points]
        ys = series.values
        spans = [t for w in windows for t in (w.start - origin, w.end - origin)]
        width = max([*xs, *spans, 0.0]) - min([*xs, *spans, 0.0])
        proxies = _shade(ax, windows, origin, width)
        marker = "o" if len(xs) <= _MARKERS_UP_TO else None
        if series.boolean:
            ax.step(
                xs, ys, where="post", color=_LINE, lw=1.6, marker=marker, ms=3, label=series.name
            )
            ax.set_yticks([0, 1], ["false", "true"])
        else:
            ax.plot(xs, ys, color=_LINE, lw=1.6, marker=marker, ms=3, label=series.name)
        if abort_at is not None:
            ax.axvline(abort_at - origin, color="#7b3fa0", lw=1.4, label="abort fired")
        for bound in tolerance_bounds(tolerance):
            ax.axhline(bound, color="#555555", lw=1, ls="--", label="tolerance")
        ax.set_xlabel("seconds since the experiment started", fontsize=8)
        ax.set_title(series.name, fontsize=9, loc="left")
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        handles, _ = ax.get_legend_handles_labels()
        ax.legend(
            handles=[*proxies, *handles[:3]],
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0,
            frameon=False,
        )
        fig.subplots_adjust(left=0.08, right=0.8, top=0.88, bottom=0.2)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return _PROLOGUE.sub("", buffer.getvalue(), count=1)


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
