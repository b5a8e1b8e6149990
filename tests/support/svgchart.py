"""Read a chart back from the SVG the report writes, independently of the product.

The axes' own tick marks give the pixel ↔ data mapping (a straight line fitted
on them); shaded rectangles and lines are mapped back to seconds and values.
Used by the comparison and recovery-window tests of tests/reporting.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np

__all__ = ["NS", "axes_span", "axis", "group", "numbers", "spans", "svgs", "texts"]

NS = "{http://www.w3.org/2000/svg}"


def svgs(html: str) -> list[ET.Element]:
    """Every inline SVG of an HTML page, parsed."""
    return [
        ET.fromstring(text)  # noqa: S314 - the product's own output, parsed in a test
        for text in re.findall(r"<svg.*?</svg>", html, re.S)
    ]


def texts(svg: ET.Element) -> set[str]:
    """Every text of a chart (titles, tick labels, the legend's labels)."""
    return {t.text or "" for t in svg.iter(f"{NS}text")}


def axis(svg: ET.Element, name: str) -> tuple[float, float]:
    """(slope, intercept) of data = slope * pixel + intercept on axis ``x`` or ``y``,
    fitted on the tick marks."""
    pixels, values = [], []
    for found in svg.iter(f"{NS}g"):
        if not re.fullmatch(f"{name}tick_\\d+", found.get("id", "")):
            continue
        mark = next(found.iter(f"{NS}use"))
        label = next(found.iter(f"{NS}text")).text or ""
        pixels.append(float(mark.get("x" if name == "x" else "y", "nan")))
        values.append(float(label.replace("\u2212", "-")))
    assert len(pixels) >= 2, f"fewer than 2 {name} ticks"
    slope, intercept = np.polyfit(pixels, values, 1)
    return float(slope), float(intercept)


def group(svg: ET.Element, suffix: str) -> ET.Element | None:
    """The first group whose id ends with ``suffix``."""
    return next((g for g in svg.iter(f"{NS}g") if g.get("id", "").endswith(suffix)), None)


def numbers(d: str) -> list[tuple[float, float]]:
    """The (x, y) pairs of an SVG path's ``d``."""
    values = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", d)]
    return list(zip(values[::2], values[1::2], strict=True))


def spans(svg: ET.Element, suffix: str) -> list[tuple[float, float]]:
    """The shaded rectangles of the group ending with ``suffix``, as sorted (start, end)
    seconds on the chart's x axis ([] when there is no such group)."""
    found = group(svg, suffix)
    if found is None:
        return []
    slope, intercept = axis(svg, "x")
    out = []
    for path in found.iter(f"{NS}path"):
        xs = [x for x, _ in numbers(path.get("d", ""))]
        out.append((slope * min(xs) + intercept, slope * max(xs) + intercept))
    return sorted(out)


def axes_span(svg: ET.Element) -> tuple[float, float]:
    """The x range the axes show, in seconds (from the axes' background rectangle,
    ``patch_2``: ``patch_1`` is the figure's)."""
    background = next(g for g in svg.iter(f"{NS}g") if g.get("id") == "patch_2")
    xs = [x for x, _ in numbers(next(background.iter(f"{NS}path")).get("d", ""))]
    slope, intercept = axis(svg, "x")
    return slope * min(xs) + intercept, slope * max(xs) + intercept
