"""The HTML report in headless Chromium (Debian's): charts are rendered, not just present."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from support.gameday_cli import run_gameday

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
