"""`comparison.html` in headless Chromium (Debian's): every badge readable, every
section named after its experiment.

The journals give every verdict a badge can show (improved, regressed, no
change, inconclusive, direction only, too short, changed) in two experiments.
Chromium renders the page; a script added to a copy of it writes each badge's
*computed* text and background colours into the DOM, which ``--dump-dom``
returns; the WCAG contrast of each pair must be at least 4.5:1. A screenshot
shows the badges painted in those colours.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from support.comparekit import P95_EXPR, Probe, window_journal
from support.gameday_cli import run_gameday

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium missing")
VERDICTS = {
    "improved",
    "regressed",
    "no change",
    "inconclusive",
    "direction only",
    "too short",
    "changed",
}
COLOURS = """<script>
for (const b of document.querySelectorAll('.badge')) {
  const s = getComputedStyle(b);
  b.setAttribute('data-fg', s.color);
  b.setAttribute('data-bg', s.backgroundColor);
}
</script>
"""
TEN_S = 'sum(rate(app_errors_total{job="app"}[10s]))'


def _series(
    level: float, fault_at: float, seed: int, until: float = 80
) -> list[tuple[float, float]]:
    rng = np.random.default_rng(seed)
    return [
        (float(t), (0.01 if t < fault_at else level) * (1 + 0.02 * float(rng.standard_normal())))
        for t in range(5, int(until))
    ]


def _journals(side: str, seed: int) -> list[dict]:
    fragile = side == "fragile"
    dns = window_journal(
        "dns saturation",
        start=1.9e9 + seed,
        fault_at=60,
        fault_s=20,
        probes=[
            Probe("app-p95-latency-over-time", _series(3.0 if fragile else 0.2, 60, seed), P95_EXPR)
        ],
        recover_s=11.0 if fragile else 0.04,
    )
    db = window_journal(
        "db exhaustion",
        start=1.9e9 + seed + 1e3,
        fault_at=60,
        fault_s=13,
        probes=[
            Probe(
                "app-p95-latency-over-time",
                _series(0.2 if fragile else 3.0, 60, seed, 73),
                P95_EXPR,
            ),
            Probe(
                "widgets", _series(5.0 if fragile else 9.0, 60, seed, 73), 'sum(widgets{job="app"})'
            ),
            Probe("app-errors-over-time", _series(1.0, 60, seed, 73), TEN_S),
        ],
    )
    return [dns, db]


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


class _Page(HTMLParser):
    """Badges with their computed colours; experiment and metric section titles."""

    def __init__(self) -> None:
        super().__init__()
        self.badges: list[tuple[str, str, str]] = []  # (verdict, fg, bg)
        self.titles: list[tuple[str, str]] = []  # (h2 or h3, its text)
        self._open: tuple[str, str, str] | None = None
        self._heading: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "span" and "badge" in (found.get("class") or "").split():
            self._open = ("", found.get("data-fg") or "", found.get("data-bg") or "")
        if tag in ("h2", "h3"):
            self._heading, self._text = tag, ""

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open = (self._open[0] + data, *self._open[1:])
        if self._heading is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self._open is not None:
            self.badges.append(self._open)
            self._open = None
        if tag == self._heading:
            self.titles.append((tag, " ".join(self._text.split())))
            self._heading = None


def _luminance(rgb: str) -> float:
    channels = [int(x) / 255 for x in re.findall(r"\d+", rgb)[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(fg: str, bg: str) -> float:
    high, low = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_badge_is_readable_and_every_section_names_its_experiment(tmp_path: Path) -> None:
    for side, seed in (("fragile", 1), ("tuned", 2)):
        (tmp_path / side).mkdir()
        for journal in _journals(side, seed):
            name = journal["experiment"]["title"].replace(" ", "-")
            (tmp_path / side / f"journal-{name}.json").write_text(json.dumps(journal))
    out = run_gameday(
        tmp_path, tmp_path / "l.sqlite3", "compare", "fragile", "tuned", "-o", "c", "--offline"
    )
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "c" / "comparison.html").read_text()
    page = tmp_path / "c" / "colours.html"
    page.write_text(html.replace("</body>", COLOURS + "</body>"))
    dom = _chromium(tmp_path / "profile-dom", "--dump-dom", page.resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Page()
    parsed.feed(dom.stdout)
    assert {v for v, _, _ in parsed.badges} == VERDICTS, parsed.badges
    for verdict, fg, bg in parsed.badges:
        assert fg and bg and "rgba(0, 0, 0, 0)" not in bg, (verdict, fg, bg)
        assert contrast(fg, bg) >= 4.5, (verdict, fg, bg, contrast(fg, bg))
    assert "${" not in dom.stdout
    experiment, seen, metrics = "", set(), 0
    for tag, text in parsed.titles[1:]:  # the first h2 is the headline
        if tag == "h2":
            assert text.startswith("Experiment: "), text
            experiment = text.removeprefix("Experiment: ")
            seen.add(experiment)
        else:
            assert experiment and text.endswith(f" — {experiment}"), (text, experiment)
            metrics += 1
    assert seen == {"dns saturation", "db exhaustion"} and metrics >= 6, parsed.titles

    shot = tmp_path / "comparison.png"
    taken = _chromium(
        tmp_path / "profile-shot",
        "--window-size=1200,12000",
        f"--screenshot={shot}",
        "--hide-scrollbars",
        page.resolve().as_uri(),
    )
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    pixels = (imread(shot)[..., :3] * 255).round().astype(int)
    for verdict, _, bg in parsed.badges:
        want = np.array([int(x) for x in re.findall(r"\d+", bg)[:3]])
        if verdict in ("improved", "regressed", "direction only", "too short"):
            painted = (np.abs(pixels - want).sum(axis=-1) <= 6).sum()
            assert painted > 100, (verdict, bg, painted)  # the badge is painted in it
