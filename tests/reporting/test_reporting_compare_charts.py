"""`comparison.html`'s time-series charts, read back from the SVG the real CLI writes.

The journals are synthetic with known times: each run settles for a different
time before its first action, so a chart that drew the runs from their start
would put the faults in different places. The SVG is parsed independently of
the product (tests/support/svgchart.py): the axes' own tick marks give the
pixel ↔ data mapping, and the shaded rectangles and the lines are mapped back
to seconds and values.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from support.gameday_cli import run_gameday
from support.journals import JournalBuilder
from support.svgchart import NS, axis, group, numbers, spans, svgs, texts

METRIC = "errors-over-time"
FAULT_S = {"baseline": 15.0, "tuned": 5.0}  # how long the first fault's ledger entry is open
SECOND_FAULT = (30.0, 35.0)  # the tuned runs inject a second fault, seconds after the first
SLACK_S = 0.35  # two pixels of an ~80 s axis


def _run(side: str, index: int, faults: bool = True) -> tuple[dict, float, list[list[float]]]:
    """One run: settle ``delay`` s, inject, record a series; returns the journal, the
    epoch of its first action and the series as (seconds after that action, value)."""
    start = 1.9e9 + index * 1e3 + (0 if side == "baseline" else 1e5)
    delay = (20.0 + 7 * index) if side == "baseline" else (45.0 + 3 * index)
    level = 10.0 if side == "baseline" else 1.0
    b = JournalBuilder("synthetic tuning", {"app-answers": True}, start=start)
    b.check("before", "app-answers", True, delay - 1)
    if faults:
        b.activity("inject", delay, 0.5, {"ledger_id": "a"})
        b.fault("netem", "netns:app/eth0", delay + 0.2, delay + 0.2 + FAULT_S[side])
        if side == "tuned":
            b.activity("inject-again", delay + SECOND_FAULT[0], 0.5, {"ledger_id": "b"})
            b.fault("netem", "netns:app/eth0", delay + 30.2, delay + SECOND_FAULT[1] + 0.2)
    relative = [float(t) for t in range(-30, 40)]
    values = [level * (1 + index / 10) if 0 <= t < FAULT_S[side] else 0.0 for t in relative]
    points = [[start + delay + t, v] for t, v in zip(relative, values, strict=True)]
    b.activity("errors-over-time", delay + 41, 0.2, {"series": points}, kind="probe")
    b.check("after", "app-answers", True, delay + 42)
    return b.build(), start + delay, [list(p) for p in zip(relative, values, strict=True)]


def _write_sides(tmp: Path, faults: bool = True) -> dict[str, list[list[list[float]]]]:
    expected = {}
    for side in ("baseline", "tuned"):
        (tmp / side).mkdir()
        expected[side] = []
        for index in range(3):
            journal, _, series = _run(side, index, faults)
            (tmp / side / f"journal-{index}.json").write_text(json.dumps(journal))
            expected[side].append(series)
    return expected


def _chart(html: str, metric: str) -> ET.Element:
    """The time-series chart of ``metric``: the SVG whose axes title is the metric and
    which draws a baseline line."""
    for svg in svgs(html):
        if metric in texts(svg) and group(svg, "-baseline-1") is not None:
            return svg
    raise AssertionError(f"no time-series chart of {metric}")


def _rects(svg: ET.Element, source: str) -> list[tuple[float, float]]:
    """The shaded spans of one source, in seconds on the chart's x axis."""
    return spans(svg, f"-fault-{source}")


def _line(svg: ET.Element, side: str, n: int) -> list[tuple[float, float]] | None:
    found = group(svg, f"-{side}-{n}")
    if found is None:
        return None
    (sx, ix), (sy, iy) = axis(svg, "x"), axis(svg, "y")
    path = next(p for p in found.iter(f"{NS}path") if "C" not in p.get("d", "C"))
    return [(sx * x + ix, sy * y + iy) for x, y in numbers(path.get("d", ""))]


def _close(found: list[tuple[float, float]], expected: list[tuple[float, float]]) -> bool:
    return len(found) == len(expected) and all(
        abs(a - c) <= SLACK_S and abs(b - d) <= SLACK_S
        for (a, b), (c, d) in zip(found, expected, strict=True)
    )


def test_both_sides_are_drawn_on_one_chart_with_every_fault_window_at_its_time(
    tmp_path: Path,
) -> None:
    expected = _write_sides(tmp_path)
    out = run_gameday(tmp_path, tmp_path / "l.sqlite3", "compare", "baseline", "tuned", "-o", "c")
    assert out.returncode == 0, out.stderr
    svg = _chart((tmp_path / "c" / "comparison.html").read_text(), METRIC)
    assert "seconds since each run's first action" in {t.text for t in svg.iter(f"{NS}text")}
    # every run counted from its first action: the baseline's 15 s faults coincide at
    # 0.2..15.2 (the tuned side's 5 s ones lie inside them), the tuned runs' second
    # fault at 30.2..35.2, whatever each run's settle time
    assert _close(
        _rects(svg, "ledger"), [(0.2, 0.2 + FAULT_S["baseline"]), (30.2, SECOND_FAULT[1] + 0.2)]
    ), _rects(svg, "ledger")
    assert _close(_rects(svg, "action"), [(0.0, 0.5), (30.0, 30.5)]), _rects(svg, "action")
    scale = max(abs(v) for runs in expected.values() for run in runs for _, v in run)
    for side, runs in expected.items():
        for n, series in enumerate(runs, start=1):
            drawn = _line(svg, side, n)
            assert drawn is not None, f"{side} run {n} is not drawn"
            assert len(drawn) == len(series), (side, n)
            for (x, y), (t, v) in zip(drawn, series, strict=True):
                assert abs(x - t) <= SLACK_S and abs(y - v) <= 0.02 * scale, (side, n, x, t, y, v)
        assert _line(svg, side, len(runs) + 1) is None


def test_a_chart_without_fault_windows_has_no_shading_to_find(tmp_path: Path) -> None:
    """The reader above is not satisfied by anything: runs without faults give a chart
    with both sides drawn and no shaded rectangle, counted from each run's start."""
    _write_sides(tmp_path, faults=False)
    out = run_gameday(tmp_path, tmp_path / "l.sqlite3", "compare", "baseline", "tuned", "-o", "c")
    assert out.returncode == 0, out.stderr
    svg = _chart((tmp_path / "c" / "comparison.html").read_text(), METRIC)
    assert _rects(svg, "ledger") == [] and _rects(svg, "action") == []
    assert group(svg, "-recovery-window-baseline") is None  # journals without gameday.recovery
    assert group(svg, "-recovery-window-tuned") is None
    assert _line(svg, "baseline", 1) is not None and _line(svg, "tuned", 3) is not None
    assert "seconds since each run started" in {t.text for t in svg.iter(f"{NS}text")}
