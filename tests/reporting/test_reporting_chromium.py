"""The HTML report in headless Chromium (Debian's): charts are rendered, not just present,
and what a reader sees of a run is read from its timeline."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread
from support.gameday_cli import run_gameday
from support.svgchart import spans, svgs, texts

from chaos_ext._core.timeline import timeline_of
from chaos_ext._products.report.model import view_of

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium missing")


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class _Svgs(HTMLParser):
    """Counts the rendered DOM's SVG charts and the drawing elements inside each."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: list[dict[str, int]] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "svg":
            self.depth += 1
            if self.depth == 1:
                self.charts.append({"path": 0, "text": 0})
        elif self.depth and tag in ("path", "text"):
            attributes = dict(attrs)
            if tag == "text" or (attributes.get("d") or "").strip():
                self.charts[-1][tag] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.depth -= 1


def test_chromium_renders_the_report_charts(real_journals: dict[str, Path], tmp_path: Path) -> None:
    out = run_gameday(
        tmp_path,
        tmp_path / "ledger.sqlite3",
        "report",
        str(real_journals["deviated"]),
        "-o",
        str(tmp_path / "r"),
    )
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "r" / "report.html").resolve().as_uri()
    dom = _chromium(tmp_path / "profile-dom", "--dump-dom", page)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parser = _Svgs()
    parser.feed(dom.stdout)
    expected = len(view_of(json.loads(real_journals["deviated"].read_text())).series)
    assert len(parser.charts) == expected >= 3
    for chart in parser.charts:  # axes, ticks, the line and the shaded windows are paths
        assert chart["path"] >= 10 and chart["text"] >= 3, chart

    shot = tmp_path / "report.png"
    taken = _chromium(
        tmp_path / "profile-shot",
        "--window-size=1200,2400",
        f"--screenshot={shot}",
        "--hide-scrollbars",
        page,
    )
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1200
    colors = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colors) > 200  # text, lines, shading: not a blank page
    red, green, blue = (pixels[..., i] for i in range(3))
    shaded = (red > 0.9) & (green > 0.75) & (green < 0.9) & (blue > 0.75) & (blue < 0.9)
    assert shaded.sum() > 2000  # the fault window (ledger) shading is painted
    line = (blue > 0.55) & (red < 0.25) & (green > 0.25) & (green < 0.5)
    assert line.sum() > 200  # the series line colour (#1f5fa8)


class _Hypothesis(HTMLParser):
    """The rendered hypothesis table: its headings and each row's cells (text)."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.rows: list[list[str]] = []
        self.inside = False
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("class", "hypothesis") in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            text = " ".join("".join(self.cell).split())
            (self.headings if tag == "th" else self.rows[-1]).append(text)
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def test_chromium_shows_a_real_runs_report_from_its_timeline(
    load_then_fault: Any, tmp_path: Path
) -> None:
    """What a reader sees of a run with loads before its fault (screenshot and DOM):
    texts substituted, figures not cut JSON, no empty column, the fault band from the
    fault's own ledger entry (never a load's), units on every axis."""
    out = run_gameday(
        tmp_path, tmp_path / "ledger.sqlite3", "report", str(load_then_fault.journal), "-o", "r"
    )
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "r" / "report.html").resolve().as_uri()
    dom = _chromium(tmp_path / "profile-dom", "--dump-dom", page)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "${" not in dom.stdout
    assert "Requests at 20/s keep flowing" in dom.stdout  # the title's ${rate}, substituted

    table = _Hypothesis()
    table.feed(dom.stdout)
    rows = [r for r in table.rows if r]
    assert table.headings[2:] == [
        "before (baseline)",
        "during the faults",
        "with faults on (steady state after the method, before the undo)",
        "after the undo (recovery)",
    ]
    assert [r[0] for r in rows] == ["load-error-ratio", "port-closed", "connect-ms"]
    for row in rows:
        for cell in row[2:]:
            assert "…" not in cell and "..." not in cell and "{" not in cell, row
    for column in range(2, len(table.headings)):
        assert any(row[column] != "—" for row in rows), table.headings[column]
    assert rows[0][4] == f"error_ratio {_after_error_ratio(load_then_fault.load()):.4g}"

    journal = load_then_fault.load()
    origin = timeline_of(journal).start
    held = next(e for e in journal["gameday"]["ledger"] if e["kind"] == "test-port")
    first_load = min(
        e["created_at"] for e in journal["gameday"]["ledger"] if e["kind"] == "http-load"
    )
    charts = svgs(dom.stdout)
    assert len(charts) == 4
    units = {"milliseconds", "ratio", "true/false", "value (unit unknown)"}
    for chart in charts:
        faults, loads = spans(chart, "-fault-ledger"), spans(chart, "-fault-load")
        assert len(faults) == 1 and abs(faults[0][0] - (held["created_at"] - origin)) <= 0.05
        assert abs(loads[0][0] - (first_load - origin)) <= 0.05 < faults[0][0] - loads[0][0]
        assert texts(chart) & units, texts(chart)  # the y axis says what it measures

    shot = tmp_path / "timeline.png"
    taken = _chromium(
        tmp_path / "profile-shot", "--window-size=1200,2200", f"--screenshot={shot}", page
    )
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    red, green, blue = (pixels[..., i] for i in range(3))
    fault = (red > 0.85) & (green > 0.72) & (green < 0.86) & (blue > 0.74) & (blue < 0.88)
    assert fault.sum() > 2000  # the fault band is painted (#d62728 at 0.18 over white)


def _after_error_ratio(journal: dict[str, Any]) -> float:
    (probe,) = [
        p
        for p in journal["steady_states"]["after"]["probes"]
        if p["activity"]["name"] == "load-error-ratio"
    ]
    return float(probe["output"]["error_ratio"])
