"""`gameday compare` against a real Prometheus (Debian's): two synthetic runs whose
fault windows differ, the same baseline, their samples in Prometheus' own TSDB.

The runs are in the past (30 minutes ago), so their samples are written with
``promtool tsdb create-blocks-from openmetrics`` (Prometheus' backfill) into the
data directory of a fresh Prometheus before it starts: an app's request
counters and latency histogram, 10 requests a second, every second. During the
fault of run A the requests take 2.5-5 s (p95 ~4.6 s) and all fail; in run B
they take 0.1-0.25 s (p95 ~0.24 s) and none fails; run C is drawn like run A.
Before the fault and after it, all three are the same quiet app.

The journals hold what a run's probe would have recorded (a range query of the
last minute when the probe ran, 6 s into the fault, fetched here without
chaos_ext), so the comparison can tell Prometheus' samples (15 in the fault
window) from the journal's (1).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.comparekit import P95_EXPR, RATIO_EXPR, Probe, window_journal
from support.gameday_cli import run_gameday

from chaos_ext._products.report.compare import Run, compare_sets, run_of
from chaos_ext._products.report.prometheus_windows import WindowSampler
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port

pytestmark = pytest.mark.skipif(
    not Path(prometheus.BINARY).exists(), reason="Debian prometheus missing"
)
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, math.inf)
FAULT_AT, FAULT_S, RECOVER_S, RUN_S = 60.0, 20.0, 5.0, 100
T0 = math.floor(time.time() / 60) * 60 - 1800  # whole minutes, 30 minutes ago
STARTS = {"A": T0, "B": T0 + 300, "C": T0 + 600}


def _latency(run: str, offset: int, rng: random.Random) -> tuple[list[float], int]:
    """The latencies of one second's 10 requests, and how many failed."""
    if not FAULT_AT <= offset < FAULT_AT + FAULT_S:
        return [0.008] * 10, 0
    if run == "B":
        return [0.2] * 10, 0
    slow = rng.randint(6, 10)  # A and C: mostly 2.5-5 s, some 1-2.5 s
    return [3.0] * slow + [2.0] * (10 - slow), 10


def _openmetrics() -> str:
    """Every second from a minute before run A to after run C, family by family."""
    rng = {name: random.Random(seed) for seed, name in enumerate(STARTS)}
    seconds: list[tuple[int, list[float], int]] = []
    for t in range(T0 - 60, STARTS["C"] + RUN_S + 60):
        run = next((n for n, s in STARTS.items() if s <= t < s + RUN_S), "")
        found = _latency(run, t - STARTS.get(run, 0), rng[run]) if run else ([0.008] * 10, 0)
        seconds.append((t, *found))
    lines = [f'up{{job="app"}} 1 {t}' for t, _, _ in seconds]
    for le in BUCKETS:
        total, label = 0, "+Inf" if le == math.inf else f"{le:g}"
        for t, latencies, _ in seconds:
            total += sum(x <= le for x in latencies)
            lines.append(
                f'http_request_duration_seconds_bucket{{job="app",le="{label}"}} {total} {t}'
            )
    for code in ("200", "500"):
        total = 0
        for t, latencies, failed in seconds:
            total += failed if code == "500" else len(latencies) - failed
            lines.append(f'http_requests_total{{job="app",code="{code}"}} {total} {t}')
    return "\n".join([*lines, "# EOF", ""])


def _range(
    prom: PrometheusServer, expr: str, start: float, end: float
) -> list[tuple[float, float]]:
    """Prometheus' own answer (urllib, not chaos_ext): what the run's probe recorded."""
    query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 1})
    with urllib.request.urlopen(f"{prom.url}/api/v1/query_range?{query}", timeout=10) as answer:  # noqa: S310
        (result,) = json.load(answer)["data"]["result"]
    return [(float(t), float(v)) for t, v in result["values"] if math.isfinite(float(v))]


def _journal(prom: PrometheusServer, run: str) -> dict[str, Any]:
    start = STARTS[run]
    probes = [
        Probe(name, [(t - start, v) for t, v in _range(prom, expr, start + 5, start + 66)], expr)
        for name, expr in (
            ("app-p95-latency-over-time", P95_EXPR),
            ("app-error-ratio-over-time", RATIO_EXPR),
        )
    ]
    return window_journal(
        "dns saturation",
        start=start,
        fault_at=FAULT_AT,
        fault_s=FAULT_S,
        probes=probes,
        recover_s=RECOVER_S,
        prometheus_url=prom.url,
    )


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    work = tmp_path_factory.mktemp("prom")
    (work / "runs.om").write_text(_openmetrics())
    made = subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(work / "runs.om"),
            str(work / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    server = prometheus.start(workdir=work)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def journals(prom: PrometheusServer) -> dict[str, dict[str, Any]]:
    return {run: _journal(prom, run) for run in STARTS}


def _rows(base: Run, tuned: Run, sampler: WindowSampler) -> dict[tuple[str, str], Any]:
    return {(c.metric, c.window): c for c in compare_sets([base], [tuned], sampler=sampler).rows}


def test_a_shorter_fault_window_p95_is_improved_from_prometheus_samples(
    journals: dict[str, dict[str, Any]],
) -> None:
    sampler = WindowSampler()
    rows = _rows(run_of(journals["A"], "a.json"), run_of(journals["B"], "b.json"), sampler)
    during = rows[("app-p95-latency-over-time", "during")]
    assert during.verdict == "improved", (during, sampler.notes)
    assert during.source == "Prometheus range query, 1 s step", during.source
    # on at +60.01, off at +80; a 5 s look-back lies inside from +66 to +80: 15 samples
    assert (during.baseline.n, during.tuned.n) == (15, 15)
    assert 4.0 < during.baseline.value < 5.0 and 0.2 < during.tuned.value < 0.25
    assert during.ci is not None and during.ci[1] < 0 and during.p_value is None
    ratio = rows[("app-error-ratio-over-time", "during")]
    assert (ratio.verdict, ratio.baseline.value, ratio.tuned.value) == ("improved", 1.0, 0.0)
    before = rows[("app-p95-latency-over-time", "before")]
    assert before.verdict == "no change" and before.baseline.n == before.tuned.n == 56, before
    assert sampler.notes == [] and "prometheus" in sampler.used


def test_overlapping_fault_windows_are_no_change_or_inconclusive(
    journals: dict[str, dict[str, Any]],
) -> None:
    rows = _rows(run_of(journals["A"], "a.json"), run_of(journals["C"], "c.json"), WindowSampler())
    during = rows[("app-p95-latency-over-time", "during")]
    assert during.verdict in ("no change", "inconclusive"), during
    assert not during.separated and during.source.startswith("Prometheus")


def test_without_the_runs_prometheus_the_journals_samples_are_used_and_said(
    journals: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    a, b = run_of(journals["A"], "a.json"), run_of(journals["B"], "b.json")
    closed = WindowSampler(url=f"http://127.0.0.1:{free_port()}", timeout_s=2)
    during = _rows(a, b, closed)[("app-p95-latency-over-time", "during")]
    assert during.source == "the journal" and during.baseline.n == 1, during
    assert any(
        "unreachable" in n and "the journals' own samples instead" in n for n in closed.notes
    )
    with prometheus.start(workdir=tmp_path / "empty") as other:  # up, but not the runs'
        elsewhere = WindowSampler(url=other.url)
        during = _rows(a, b, elsewhere)[("app-p95-latency-over-time", "during")]
    assert during.source == "the journal", during
    assert any("not the run's Prometheus" in n for n in elsewhere.notes), elsewhere.notes


def test_the_cli_says_where_the_samples_came_from(
    journals: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    for side, run in (("fragile", "A"), ("tuned", "B")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "journal-dns.json").write_text(json.dumps(journals[run]))
    out = run_gameday(tmp_path, tmp_path / "l.sqlite3", "compare", "fragile", "tuned", "-o", "c")
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stderr.splitlines() if "app-p95-latency-over-time, during" in x)
    assert ": improved (" in line and "time series, 1 run(s) vs 1" in line, line
    md = (tmp_path / "c" / "comparison.md").read_text()
    row = next(x for x in md.splitlines() if x.startswith("| app-p95-latency-over-time | during"))
    assert "Prometheus range query, 1 s step" in row and "15 vs 15 in 1 vs 1 run(s)" in row, row
