"""The comparison's chart of one metric: the samples it compared, window by window (SVG).

Titled ``<metric> — <experiment>``, as its section.

Every run of both sides is drawn from its own first fault on (x = 0; a run
without a fault from its start), only with the samples the comparison used:
those inside each window (before the faults, during them, after the undo), so
the line stops where a window does. The fault window is shaded from 0 to the
longest run's last undo, and each side's compared value in each window (its
median, or mean) is a dashed level over that window: what the row's verdict
and effect are about, on the chart. The y range comes from the data
(:func:`~.chart_axes.y_range`), the tolerance is a band, the y axis has the
metric's unit.

Each side's recovery windows (:mod:`.recovery_window`: from the last undo to
the first check that held again, or to the end of the bound) are shaded as on
the report's charts, one rectangle a run, light green for the baseline, green
for the tuned side, grey for a run that did not recover; the legend gives each
side's range ("tuned: recovery 3 s, 1 not recovered within 30 s").

SVG ids: ``<salt>-fault``, ``<salt>-<side>-<run>-<window>`` (the samples of one
run in one window), ``<salt>-level-<side>-<window>`` (the compared value),
``<salt>-recovery-window-<side>``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from chaos_ext._products.report.chart_axes import legend_handles, tolerance_band, y_range
from chaos_ext._products.report.compare import Drawn
from chaos_ext._products.report.recovery_window import RecoveryWindow
from chaos_ext._products.report.stats import Comparison

__all__ = ["window_chart"]

_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_SIDES = {"baseline": ("#7f7f7f", 3.0), "tuned": ("#1f5fa8", 1.4)}
_FAULT = ("#d62728", 0.14)
_RECOVERY = {"baseline": ("#98df8a", "#b0b0b0", 0.35), "tuned": ("#2ca02c", "#5f6b7a", 0.2)}


def _recovery_label(side: str, windows: Sequence[RecoveryWindow]) -> str:
    """A side's range of recovery times and how many runs did not recover."""
    times = sorted(w.seconds for w in windows if w.recovered)
    parts = []
    if times:
        span = f"{times[0]:g}" if times[0] == times[-1] else f"{times[0]:g}–{times[-1]:g}"
        parts.append(f"recovery {span} s")
    if failed := [w for w in windows if not w.recovered]:
        parts.append(f"{len(failed)} not recovered within {max(w.seconds for w in failed):g} s")
    return f"{side}: " + ", ".join(parts)


def _recoveries(ax: Any, drawn: Sequence[Drawn], salt: str) -> list[Any]:
    """Each side's recovery windows, one rectangle a run, from its own origin."""
    proxies = []
    for side in _SIDES:
        runs = {(d.run, d.origin): d.recovery for d in drawn if d.side == side and d.recovery}
        windows = [(w, origin) for (_, origin), w in runs.items() if w is not None]
        if not windows:
            continue
        good, bad, alpha = _RECOVERY[side]
        ax.broken_barh(
            [(w.start - origin, max(w.seconds, 0.05)) for w, origin in windows],
            (0, 1),
            transform=ax.get_xaxis_transform(),
            facecolors=[good if w.recovered else bad for w, _ in windows],
            alpha=alpha,
            lw=0,
            gid=f"{salt}-recovery-window-{side}",
        )
        colour = good if all(w.recovered for w, _ in windows) else bad
        label = _recovery_label(side, [w for w, _ in windows])
        proxies.append(Patch(color=colour, alpha=alpha, label=label))
    return proxies


def _lines(ax: Any, drawn: Sequence[Drawn], salt: str) -> None:
    for d in drawn:
        if not d.points:
            continue
        color, width = _SIDES[d.side]
        xs = [t - d.origin for t, _ in d.points]
        ys = [v for _, v in d.points]
        style = {"marker": "o", "ms": 3} if len(xs) <= 80 else {}
        ax.plot(
            xs,
            ys,
            color=color,
            lw=width,
            alpha=0.85,
            gid=f"{salt}-{d.side}-{d.run}-{d.window}",
            label="_",
            **style,
        )


def _levels(ax: Any, drawn: Sequence[Drawn], rows: Sequence[Comparison], salt: str) -> None:
    for row in rows:
        for side, value in (("baseline", row.baseline.value), ("tuned", row.tuned.value)):
            xs = [
                t - d.origin
                for d in drawn
                if d.side == side and d.window == row.window
                for t, _ in d.points
            ]
            if not xs:
                continue
            color, _ = _SIDES[side]
            ax.hlines(
                value,
                min(xs),
                max(xs) or min(xs) + 0.5,
                colors=color,
                linestyles="--",
                lw=1.6,
                gid=f"{salt}-level-{side}-{row.window}",
            )


def window_chart(
    title: str,
    drawn: Sequence[Drawn],
    rows: Sequence[Comparison],
    unit: str,
    tolerance: Any = None,
    salt: str = "",
) -> str:
    """The chart (module docstring); ``""`` when no run has a sample to draw."""
    values = [v for d in drawn for _, v in d.points]
    if not values:
        return ""
    runs = {side: len({d.run for d in drawn if d.side == side}) for side in _SIDES}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt or title}):
        fig = Figure(figsize=(8.6, 2.6), dpi=96)
        ax = fig.add_subplot()
        proxies: list[Any] = []
        fault = max((d.fault_s for d in drawn if d.fault_s is not None), default=None)
        if fault is not None:
            ax.axvspan(0, fault, color=_FAULT[0], alpha=_FAULT[1], lw=0, gid=f"{salt}-fault")
            proxies.append(Patch(color=_FAULT[0], alpha=_FAULT[1], label="faults on"))
        proxies += _recoveries(ax, drawn, salt)
        _lines(ax, drawn, salt)
        _levels(ax, drawn, rows, salt)
        limits = y_range(values, tolerance)
        ax.set_ylim(*limits)
        proxies += tolerance_band(ax, tolerance, limits, f"{salt}-tolerance")
        for side, (color, width) in _SIDES.items():
            proxies.append(
                Line2D([], [], color=color, lw=width, label=f"{side} ({runs[side]} run(s))")
            )
        proxies.append(Line2D([], [], color="#333333", ls="--", lw=1.6, label="value compared"))
        origin = "first fault" if fault is not None else "start"
        ax.set_xlabel(f"seconds since each run's {origin}", fontsize=8)
        ax.set_ylabel(unit or "value (unit unknown)", fontsize=8)
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
