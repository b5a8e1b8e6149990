"""`comparison.html`'s charts agree with its rows, read back from the SVG the real CLI
writes (tests/support/svgchart.py maps pixels to data through the axes' own ticks).

Each metric's chart draws the samples the rows compared, window by window, from
each run's first fault on; each side's compared value is a level over its window.
The level a chart draws is the value its row states, and the lines start where
the fault window's samples start (after the query's look-back), not before.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from support.comparekit import P95_EXPR, Probe, window_journal
from support.gameday_cli import run_gameday
from support.svgchart import NS, axis, group, numbers, spans, svgs, texts

from chaos_ext._products.report.compare import compare_sets, run_of

FAULT_AT, FAULT_S = 60.0, 20.0
METRIC = "app-p95-latency-over-time"


def _journal(level: float, seed: int, tail: float) -> dict:
    rng = np.random.default_rng(seed)
    points = []
    for t in range(5, 80):
        value = 0.01 if t < FAULT_AT else level * (1 + 0.05 * float(rng.standard_normal()))
        points.append((float(t), tail if FAULT_AT <= t < FAULT_AT + 4 else value))
    return window_journal(
        "dns saturation",
        start=1.9e9 + seed * 1e4,
        fault_at=FAULT_AT,
        fault_s=FAULT_S,
        probes=[Probe(METRIC, points, P95_EXPR)],
    )


def _chart(html: str, title: str) -> ET.Element:
    for svg in svgs(html):
        if title in texts(svg):
            return svg
    raise AssertionError(f"no chart titled {title!r}")


def _level(svg: ET.Element, side: str, window: str) -> tuple[float, float, float]:
    """(x from, x to, y) of a side's compared value over a window, in data units."""
    found = group(svg, f"-level-{side}-{window}")
    assert found is not None, f"no level of {side} {window}"
    (x1, y1), (x2, _) = numbers(next(found.iter(f"{NS}path")).get("d", ""))[:2]
    (sx, ix), (sy, iy) = axis(svg, "x"), axis(svg, "y")
    return sx * x1 + ix, sx * x2 + ix, sy * y1 + iy


def test_each_charts_levels_are_its_rows_values_over_their_windows(tmp_path: Path) -> None:
    journals = {"fragile": _journal(3.0, 1, 3.0), "tuned": _journal(0.2, 2, 1.5)}
    for side, journal in journals.items():
        (tmp_path / side).mkdir()
        (tmp_path / side / "journal-dns.json").write_text(json.dumps(journal))
    out = run_gameday(
        tmp_path, tmp_path / "l.sqlite3", "compare", "fragile", "tuned", "-o", "c", "--offline"
    )
    assert out.returncode == 0, out.stderr
    svg = _chart((tmp_path / "c" / "comparison.html").read_text(), f"{METRIC} — dns saturation")
    rows = compare_sets([run_of(journals["fragile"])], [run_of(journals["tuned"])]).rows
    during = next(c for c in rows if c.metric == METRIC and c.window == "during")
    assert during.verdict == "improved"
    (sy, _), span = axis(svg, "y"), abs(during.baseline.value - during.tuned.value)
    for side, value in (("baseline", during.baseline.value), ("tuned", during.tuned.value)):
        start, end, level = _level(svg, side, "during")
        assert abs(level - value) < 0.02 * span, (side, level, value)
        # the fault window's samples: from +66 (a 5 s look-back inside a fault on at
        # +60.01) to +79, so the tuned side's 1.5 s tail of the experiment before is out
        assert abs(start - 6.0) < 0.3 and abs(end - 19.0) < 0.3, (side, start, end)
    assert abs(sy) > 0
    (fault,) = spans(svg, "-fault")
    assert abs(fault[0]) < 0.3 and abs(fault[1] - (FAULT_S - 0.01)) < 0.3, fault
    assert "seconds" in texts(svg)  # the unit on the y axis
    assert "seconds since each run's first fault" in texts(svg)
    tuned_line = group(svg, "-tuned-1-during")
    assert tuned_line is not None
    ys = [y for _, y in numbers(next(tuned_line.iter(f"{NS}path")).get("d", ""))]
    sy, iy = axis(svg, "y")
    assert max(sy * y + iy for y in ys) < 0.5  # no sample of the tail drawn in the window
