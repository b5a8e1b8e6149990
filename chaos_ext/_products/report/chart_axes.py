"""A chart's y range, its tolerance band and its legend (matplotlib helpers).

The y range comes from the data: a tolerance bound is drawn in it only when it
is near the data (within the data's own span of it), so a range such as
``[-10, 0.3]`` never squashes a 0.86 deviation into the top line; the tolerance
is drawn as a band (what is within it), clipped to the axes. A single value is
given room around it. The legend lists each thing once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from chaos_ext._products.report.series import as_number

__all__ = ["legend_handles", "tolerance_band", "tolerance_range", "y_range"]

_BAND = ("#2ca02c", 0.1)
_PAD = 0.08


def tolerance_range(tolerance: Any) -> tuple[float, float] | None:
    """``(low, high)`` of what a tolerance accepts, when it is a number, a bool or a range
    (an open end is infinite); None when it does not bound a number."""
    if isinstance(tolerance, bool):
        return (1.0, 1.0) if tolerance else (0.0, 0.0)
    if isinstance(tolerance, int | float):
        return float(tolerance), float(tolerance)
    if isinstance(tolerance, dict) and tolerance.get("type") == "range":
        bounds = [*(tolerance.get("range") or []), None, None][:2]
        low, high = as_number(bounds[0]), as_number(bounds[1])
        return (-math.inf if low is None else low, math.inf if high is None else high)
    return None


def y_range(values: Sequence[float], tolerance: Any = None) -> tuple[float, float]:
    """The y limits for ``values``: the data, padded; a tolerance bound near the data
    (within the data's span of it) drawn in too (module docstring)."""
    low, high = min(values), max(values)
    near = high - low or max(2 * abs(high), 1.0)  # how far from the data a bound is "near"
    accepted = tolerance_range(tolerance)
    for bound in accepted or ():
        if math.isfinite(bound) and low - near <= bound <= high + near:
            low, high = min(low, bound), max(high, bound)
    span = high - low or max(abs(high), 1e-3)
    pad = (high - low or span) * _PAD
    if low == high:
        pad = span * 0.5
    return low - pad, high + pad


def tolerance_band(ax: Any, tolerance: Any, limits: tuple[float, float], gid: str) -> list[Any]:
    """Shade what ``tolerance`` accepts within ``limits`` (a line for a single value);
    returns the legend's proxy (none when the tolerance bounds no number)."""
    accepted = tolerance_range(tolerance)
    if accepted is None:
        return []
    low, high = max(accepted[0], limits[0]), min(accepted[1], limits[1])
    color, alpha = _BAND
    if accepted[0] == accepted[1]:
        if not limits[0] <= accepted[0] <= limits[1]:
            return []
        ax.axhline(accepted[0], color=color, lw=1.2, ls="--", gid=gid)
        return [Line2D([], [], color=color, lw=1.2, ls="--", label="tolerance")]
    if low >= high:
        return []  # the whole chart lies outside what the tolerance accepts
    ax.axhspan(low, high, color=color, alpha=alpha, lw=0, gid=gid)
    return [Patch(color=color, alpha=alpha, label="within tolerance")]


def legend_handles(ax: Any, proxies: Sequence[Any]) -> list[Any]:
    """The proxies, then the axes' labelled artists, each label once (a ``_``-label is
    matplotlib's "not in the legend")."""
    handles, _ = ax.get_legend_handles_labels()
    seen: set[str] = set()
    found = []
    for handle in [*proxies, *handles]:
        label = str(handle.get_label())
        if label.startswith("_") or label in seen:
            continue
        seen.add(label)
        found.append(handle)
    return found
