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

from chaos_ext.reporting.model import FaultWindow
from chaos_ext.reporting.series import Series, as_number

__all__ = ["chart_svg", "distribution_svg", "tolerance_bounds"]

_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_COLORS = {"ledger": ("#d62728", 0.18), "action": ("#ff9f1c", 0.22)}
_LINE = "#1f5fa8"


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


def _shade(ax: Any, windows: Sequence[FaultWindow], origin: float) -> None:
    seen: set[str] = set()
    for window in windows:
        color, alpha = _COLORS.get(window.source, _COLORS["action"])
        label = "fault (ledger)" if window.source == "ledger" else "action running"
        end = window.end if window.end > window.start else window.start + 0.05
        ax.axvspan(
            window.start - origin, end - origin, color=color, alpha=alpha, lw=0,
            label=None if label in seen else label,
        )  # fmt: skip
        seen.add(label)


def chart_svg(
    series: Series,
    windows: Sequence[FaultWindow],
    origin: float,
    tolerance: Any = None,
    salt: str = "",
) -> str:
    """An SVG document (no XML prologue) charting ``series``; times relative to ``origin``."""
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt or series.name}):
        fig = Figure(figsize=(7.2, 2.4), dpi=96)
        ax = fig.add_subplot()
        _shade(ax, windows, origin)
        xs = [t - origin for t, _ in series.points]
        ys = series.values
        if series.boolean:
            ax.step(xs, ys, where="post", color=_LINE, lw=1.6, marker="o", ms=3, label=series.name)
            ax.set_yticks([0, 1], ["false", "true"])
        else:
            ax.plot(xs, ys, color=_LINE, lw=1.6, marker="o", ms=3, label=series.name)
        for bound in tolerance_bounds(tolerance):
            ax.axhline(bound, color="#555555", lw=1, ls="--", label="tolerance")
        ax.set_xlabel("seconds since the experiment started", fontsize=8)
        ax.set_title(series.name, fontsize=9, loc="left")
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        _legend(ax)
        fig.tight_layout()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return _PROLOGUE.sub("", buffer.getvalue(), count=1)


def _legend(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper right", framealpha=0.8)


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
        fig.tight_layout()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return _PROLOGUE.sub("", buffer.getvalue(), count=1)
