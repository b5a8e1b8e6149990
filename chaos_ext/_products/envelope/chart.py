"""The envelope chart: magnitude on x, the hypothesis' measured values on y (inline SVG).

One panel per hypothesis probe with numeric output (up to four): each run's
values while the fault was in place (the ``during`` and ``after`` checks) at
its magnitude, a filled circle when the run held, a cross when it deviated, a
hollow grey square when it counted for nothing (unsteady, failed ...); the
tolerance as a green band (or a dashed line); the boundary interval between
the harshest magnitude that held and the mildest that deviated shaded. A
relative resolution over a wide range (HIGH/LOW >= 20) is drawn on a log axis,
where its geometric bisection is evenly spaced. Two envelopes (compare) share
the panels, the second in another colour.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from chaos_ext._products.envelope.view import EnvelopeView
from chaos_ext._products.report.charts import tolerance_bounds

__all__ = ["MAX_PANELS", "envelope_svg", "probes_of"]

MAX_PANELS = 4
_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_SIDES = (("#1f5fa8", "#2a9d4b", "#d62728"), ("#ff7f0e", "#17becf", "#9467bd"))
_PHASES = ("during", "after")
_LOG_FROM = 20  # a relative search over HIGH/LOW >= 20 is drawn on a log axis


def probes_of(views: Sequence[EnvelopeView]) -> list[str]:
    """Hypothesis probes with at least one numeric value, in first-seen order."""
    names: list[str] = []
    for view in views:
        for run in view.runs:
            for check in run.get("hypothesis") or []:
                if check.get("value") is not None and check["probe"] not in names:
                    names.append(check["probe"])
    return names


def _points(view: EnvelopeView, probe: str | None) -> dict[str, list[tuple[float, float]]]:
    found: dict[str, list[tuple[float, float]]] = {"held": [], "deviated": [], "other": []}
    for run in view.runs:
        outcome = {"not-recovered": "deviated"}.get(run["outcome"], run["outcome"])
        outcome = outcome if outcome in ("held", "deviated") else "other"
        magnitude = float(run["magnitude"])
        if probe is None:
            found[outcome].append((magnitude, 1.0 if outcome == "held" else 0.0))
            continue
        for check in run.get("hypothesis") or []:
            if check["probe"] == probe and check["phase"] in _PHASES and check["value"] is not None:
                found[outcome].append((magnitude, float(check["value"])))
    return found


def _band(ax: Any, tolerance: Any) -> None:
    bounds = tolerance_bounds(tolerance)
    if len(bounds) == 2:
        ax.axhspan(min(bounds), max(bounds), color="#2a9d4b", alpha=0.09, lw=0, label="tolerance")
        for bound in bounds:
            ax.axhline(bound, color="#2a9d4b", lw=0.8, ls="--")
    elif len(bounds) == 1:
        ax.axhline(bounds[0], color="#2a9d4b", lw=1, ls="--", label="tolerance")


def _boundary(ax: Any, view: EnvelopeView, colour: str, suffix: str) -> None:
    env, space = view.envelope, view.search.space
    if env.held is not None and env.deviated is not None:
        lo, hi = sorted((env.held, env.deviated))
        width = max(hi - lo, (space.high - space.low) / 400)
        ax.axvspan(lo, lo + width, color=colour, alpha=0.18, lw=0, label=f"boundary{suffix}")
    elif env.deviated is not None:
        ax.axvline(env.deviated, color=colour, lw=1.4, label=f"breaks at the mild end{suffix}")
    elif env.held is not None:
        ax.axvline(env.held, color=colour, lw=1.4, ls=":", label=f"holds to the harsh end{suffix}")


def _counts(ax: Any, view: EnvelopeView, colour: str, index: int) -> None:
    """How many runs held / deviated at each side of the boundary, above the panel."""
    env = view.envelope
    for tally in env.tallies:
        parts = [f"{len(tally.held)} held"] if tally.held else []
        parts += [f"{len(tally.deviated)} deviated"] if tally.deviated else []
        other = env.deviated if tally.magnitude == env.held else env.held
        align = "center" if other is None else "right" if tally.magnitude < other else "left"
        ax.annotate(
            ", ".join(parts),
            (tally.magnitude, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(0, 3 + 10 * index),
            textcoords="offset points",
            ha=align,
            fontsize=7,
            color=colour if tally.agree else "#b71c1c",
        )


def _panel(ax: Any, views: Sequence[EnvelopeView], probe: str | None) -> None:
    for index, view in enumerate(views):
        _, held_colour, deviated_colour = _SIDES[index % 2]
        points = _points(view, probe)
        suffix = f" ({view.label})" if len(views) > 1 else ""
        for outcome, marker, colour in (
            ("held", "o", held_colour),
            ("deviated", "x", deviated_colour),
            ("other", "s", "#9a9a9a"),
        ):
            if points[outcome]:
                xs, ys = zip(*points[outcome], strict=True)
                face = "none" if outcome == "other" else colour
                ax.scatter(
                    xs,
                    ys,
                    marker=marker,
                    s=28,
                    color=colour,
                    facecolors=face,
                    lw=1.4,
                    label=f"{outcome}{suffix}",
                    zorder=3,
                )
        _boundary(ax, view, _SIDES[index % 2][0], suffix)
        _counts(ax, view, _SIDES[index % 2][0], index)
    if probe is None:
        ax.set_yticks([0, 1], ["deviated", "held"])
        ax.set_title("hypothesis (no numeric probe output)", fontsize=9, loc="left")
    else:
        _band(ax, views[0].tolerances.get(probe))
        ax.set_title(probe, fontsize=9, loc="left")
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)


def envelope_svg(views: Sequence[EnvelopeView], salt: str = "") -> str:
    """An SVG document (no XML prologue) of one envelope, or two overlaid."""
    probes: list[str | None] = list(probes_of(views)[:MAX_PANELS]) or [None]
    first = views[0]
    space = first.search.space
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt or first.key}):
        fig = Figure(figsize=(8.6, 1.2 + 2.1 * len(probes)), dpi=96)
        axes = fig.subplots(len(probes), 1, sharex=True, squeeze=False)[:, 0]
        for ax, probe in zip(axes, probes, strict=True):
            _panel(ax, views, probe)
        lows = [v.search.space.low for v in views]
        highs = [v.search.space.high for v in views]
        if space.relative and min(lows) > 0 and max(highs) / min(lows) >= _LOG_FROM:
            axes[-1].set_xscale("log")  # geometric bisection: evenly spaced on a log axis
            axes[-1].xaxis.set_major_formatter(ScalarFormatter())
            axes[-1].set_xlim(min(lows) / 1.1, max(highs) * 1.1)
        else:
            pad = (max(highs) - min(lows)) * 0.03
            axes[-1].set_xlim(min(lows) - pad, max(highs) + pad)
        harsher = "harsher →" if space.direction == "up" else "← harsher"
        unit = f" ({first.unit})" if first.unit != first.argument else ""
        axes[-1].set_xlabel(f"{first.argument}{unit}, {harsher}", fontsize=8)
        handles, labels = axes[0].get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        axes[0].legend(
            unique.values(),
            unique.keys(),
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0,
            frameon=False,
        )
        title = " vs ".join(f"{v.label}: {v.phrase()}" for v in views)
        fig.suptitle(first.summary if len(views) == 1 else title, fontsize=9, x=0.08, ha="left")
        fig.subplots_adjust(
            left=0.09,
            right=0.76,
            top=1 - 0.45 / fig.get_figheight(),
            bottom=0.5 / fig.get_figheight() + 0.05,
            hspace=0.35,
        )
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return _PROLOGUE.sub("", buffer.getvalue(), count=1)
