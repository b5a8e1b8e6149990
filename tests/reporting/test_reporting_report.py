"""`gameday report`: HTML + summary.md from real and synthetic journals."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.gameday_cli import cli_env, run_gameday
from support.journals import JournalBuilder

from chaos_ext._products.report.charts import merged_spans
from chaos_ext._products.report.model import FaultWindow, view_of
from chaos_ext._products.report.render import render_html
from chaos_ext._products.report.score import resilience_score


def _report(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_gameday(tmp_path, tmp_path / "ledger.sqlite3", "report", *args)


def _section(markdown: str, heading: str) -> str:
    start = markdown.index(heading)
    following = markdown.find("\n### ", start + len(heading))
    return markdown[start : following if following > 0 else None]


def _states(journal: dict[str, Any], phase: str) -> list[dict[str, Any]]:
    block = journal["steady_states"][phase]
    return block if isinstance(block, list) else [block] if block else []


def test_summary_of_a_deviated_run_with_a_rollback(
    real_journals: dict[str, Path], tmp_path: Path
) -> None:
    out = _report(tmp_path, str(real_journals["deviated"]), "-o", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    summary = (tmp_path / "r" / "summary.md").read_text()
    journal = json.loads(real_journals["deviated"].read_text())
    assert "## a held port is noticed: deviated" in summary
    assert "**Resilience score: 0.0 / 100 (0 of 1 hypotheses held)**" in summary
    hypothesis = _section(summary, "### Steady-state hypothesis")
    header = next(line for line in hypothesis.splitlines() if line.startswith("| probe"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "probe",
        "tolerance",
        "before (baseline)",
        "during the faults",
        "with faults on (steady state after the method, before the undo)",
        "after the undo (recovery)",
    ]
    port_row = next(line for line in hypothesis.splitlines() if line.startswith("| port-closed"))
    cells = [c.strip() for c in port_row.strip("|").split("|")]
    assert cells[1] == "== false"
    # the windows, from the held port's own ledger entry (not from the product's rule)
    held = next(e for e in journal["gameday"]["ledger"] if e["kind"] == "test-port")
    checks = [
        p
        for phase in ("before", "during")
        for s in _states(journal, phase)
        for p in s["probes"]
        if p["activity"]["name"] == "port-closed"
    ]
    ends = [datetime.fromisoformat(p["end"]).timestamp() for p in checks]
    before = [p for p, t in zip(checks, ends, strict=True) if t < held["created_at"]]
    during = [p for p, t in zip(checks, ends, strict=True) if t >= held["created_at"]]
    misses = sum(1 for p in during if not p["tolerance_met"])
    assert cells[2] in ("false ✓", f"{len(before)} checks, 0 out of tolerance ✓")
    assert cells[3].startswith(f"{len(during)} checks, {misses} out of tolerance")
    assert "out of tolerance" in cells[3]  # during: the held port was seen open
    assert cells[4] == "true ✗ **out of tolerance**"  # Chaos Toolkit's after: still held
    assert cells[5] == "false ✓"  # the recovery check, after the undo
    assert "(see the cells marked ✗)" in summary
    method = _section(summary, "### Method")
    assert re.search(r"\| hold-the-port \| action \| succeeded \|", method)
    assert re.search(r"\| measure-connects \| probe \| succeeded \|.*\"series\"", method)
    rollbacks = _section(summary, "### Rollbacks")
    assert re.search(r"\| undo-this-run \| action \| succeeded \|.*\"undone\": 1", rollbacks)
    ledger = _section(summary, "### Fault ledger")
    port = journal["gameday"]["ledger"][0]["target"]
    assert re.search(
        rf"\| test-port \| fault \| {re.escape(port)} \| \+\d+\.\d s \| \+\d+\.\d s \| closed \|",
        ledger,
    )


def test_html_is_self_contained_with_one_chart_per_series(
    real_journals: dict[str, Path], tmp_path: Path
) -> None:
    out = _report(
        tmp_path,
        str(real_journals["deviated"]),
        str(real_journals["held"]),
        "-o",
        str(tmp_path / "r"),
    )
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    views = [view_of(json.loads(p.read_text())) for p in real_journals.values()]
    assert html.count("<svg") == sum(len(v.series) for v in views)
    names = {s.name for s in views[0].series}
    assert {"port-closed", "connect-ms", "measure-connects"} <= names
    assert "50.0" in html and "1 of 2 hypotheses held" in html
    assert len(list((tmp_path / "r" / "journals").glob("*.json"))) == 2


def test_secrets_are_masked_in_every_output(tmp_path: Path) -> None:
    """A journal written by plain `chaos run` (no gameday redaction) with a leaked secret."""
    secret = "hunter2-correct-horse"
    experiment = {
        "title": "leaky",
        "description": "an activity echoes a secret into its output",
        "secrets": {"db": {"password": secret}},
        "steady-state-hypothesis": {
            "title": "t",
            "probes": [
                {
                    "type": "probe",
                    "name": "leak",
                    "tolerance": f"connected with {secret}",
                    "provider": {
                        "type": "python",
                        "module": "support.reportkit",
                        "func": "echo_secret",
                        "arguments": {"value": secret},
                    },
                }
            ],
        },
        "method": [],
    }
    path = tmp_path / "leaky.json"
    path.write_text(json.dumps(experiment))
    env = cli_env(tmp_path / "ledger.sqlite3")
    chaos = Path(sys.executable).with_name("chaos")
    subprocess.run(
        [str(chaos), "--no-log-file", "run", "--journal-path", str(tmp_path / "j.json"), str(path)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert secret in (tmp_path / "j.json").read_text()  # plain chaos run leaks it
    out = _report(
        tmp_path, str(tmp_path / "j.json"), "-o", str(tmp_path / "r"), "--redact", "another-value"
    )
    assert out.returncode == 0, out.stderr
    written = [p for p in (tmp_path / "r").rglob("*") if p.is_file()]
    assert len(written) == 3
    for file in written:
        text = file.read_text()
        assert secret not in text, file
    assert "connected with ***" in (tmp_path / "r" / "summary.md").read_text()


def test_score_is_the_weighted_share_of_hypotheses_held() -> None:
    def run(held: bool, weight: float | None) -> JournalBuilder:
        b = JournalBuilder("w", {"errors": 0}, weight=weight)
        b.check("before", "errors", 0, 0)
        b.check("after", "errors", 0 if held else 3, 1)
        return b

    views = [view_of(run(True, 3).build()), view_of(run(False, None).build())]
    score = resilience_score(views)
    assert (score.value, score.held, score.counted) == (75.0, 1, 2)
    no_hypothesis = JournalBuilder("none", {})
    no_hypothesis.activity("act", 0, 1)
    assert resilience_score([view_of(no_hypothesis.build())]).value is None
    failed = run(True, 1)
    failed.activity("inject", 0.5, 0.1, "refused", status="failed")
    assert resilience_score([view_of(failed.build())]).value == 0.0


def test_series_come_from_numbers_pairs_and_prometheus_answers() -> None:
    b = JournalBuilder("s", {"p99": {"type": "range", "range": [0, 0.3]}})
    b.check("before", "p99", 0.12, 0)
    b.activity(
        "range-query",
        1,
        0.1,
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    {"metric": {"pod": "a"}, "values": [[T, "1.5"] for T in (10, 20)]},
                    {"metric": {"pod": "b"}, "values": [[10, "2"], [20, "NaN"]]},
                ],
            },
        },
        kind="probe",
    )
    b.activity("pairs", 2, 0.1, {"samples": [{"t": 5, "v": 3}, [6, 4]]}, kind="probe")
    b.activity("held", 3, 0.1, {"value": 20, "refused_at": 38}, kind="action")
    b.activity("text", 4, 0.1, "not a number", kind="probe")
    stats = {"min": 1, "max": 9, "mean": 4, "p50": 4, "p95": 8, "p99": 9, "count": 20}
    b.activity("window", 5, 0.1, stats, kind="probe")
    series = {s.name: s for s in view_of(b.build()).series}
    assert series["p99"].values == [0.12] and series["p99"].hypothesis
    assert series['range-query{pod="a"}'].points == ((10.0, 1.5), (20.0, 1.5))
    assert series['range-query{pod="b"}'].points == ((10.0, 2.0),)  # NaN dropped
    assert series["pairs"].points == ((5.0, 3.0), (6.0, 4.0))
    assert series["held"].values == [20.0]
    assert "text" not in series
    assert [series[f"window {k}"].values for k in ("p50", "p95", "p99")] == [[4.0], [8.0], [9.0]]
    assert "window" not in series


def test_a_1000_activity_journal_renders_in_seconds() -> None:
    b = JournalBuilder("big", {"latency": {"type": "range", "range": [0, 100]}})
    b.check("before", "latency", 10, 0)
    for i in range(1000):
        if i % 2:
            b.activity(f"probe-{i % 10}", i * 0.1, 0.05, 10 + i % 7, kind="probe")
        else:
            b.activity("inject", i * 0.1, 0.05, {"held": i})
    b.check("after", "latency", 12, 101)
    view = view_of(b.build())
    begin = time.perf_counter()
    html = render_html([view], "big")
    elapsed = time.perf_counter() - begin
    assert html.count("<tr><td>inject</td>") == 500
    assert elapsed < 10, f"{elapsed:.1f} s"  # the benchmark measures it; this is a guard


def test_an_unreadable_journal_is_invalid_input(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    out = _report(tmp_path, str(tmp_path / "bad.json"), "-o", str(tmp_path / "r"))
    assert out.returncode == 3
    assert "bad.json: line 1: invalid JSON" in out.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("missing", ["nothing-here.json"])
def test_a_missing_journal_is_invalid_input(tmp_path: Path, missing: str) -> None:
    out = _report(tmp_path, missing, "-o", str(tmp_path / "r"))
    assert out.returncode == 3


def test_fault_windows_are_joined_only_below_the_gap() -> None:
    windows = [
        FaultWindow("a", 0, 1, "action"),
        FaultWindow("b", 1.5, 2, "action"),
        FaultWindow("c", 0.5, 3, "ledger"),
        FaultWindow("d", 10, 10, "action"),
    ]
    assert merged_spans(windows, "action") == [(0, 1), (1.5, 2), (10, 10.05)]
    assert merged_spans(windows, "action", gap=0.5) == [(0, 2), (10, 10.05)]
    assert merged_spans(windows, "ledger") == [(0.5, 3)]


def test_an_abort_condition_that_fired_is_reported(tmp_path: Path) -> None:
    """The `gameday.abort` record of docs/prometheus.md: in the summary, the chart and JUnit."""
    b = JournalBuilder("aborted", {"error-ratio": {"type": "range", "range": [0, 0.05]}})
    b.check("before", "error-ratio", 0.01, 0)
    b.activity("inject", 1, 0.2, {"delay_seconds": 200})
    for i in range(5):
        b.check("during", "error-ratio", 0.01 * (i + 1), 2 + i)
    journal = b.build(status="interrupted")
    fired_at = b.start + 6.5
    journal["gameday"]["abort"] = {
        "plan": "probes/abort/edge.yaml",
        "checks": 7,
        "fired": {
            "reason": "breach",
            "condition": "http-error-ratio",
            "value": 0.2,
            "detail": "0.2 is not < 0.05",
            "at_unix": fired_at,
        },
    }
    path = tmp_path / "aborted.json"
    path.write_text(json.dumps(journal))
    out = _report(tmp_path, str(path), "-o", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "## aborted: aborted" in summary
    assert "Abort: stopped by http-error-ratio (breach): 0.2 is not < 0.05 at +6.5 s" in summary
    html = (tmp_path / "r" / "report.html").read_text()
    assert html.count("abort fired") == 1  # the legend of the one chart
    gate = run_gameday(
        tmp_path,
        tmp_path / "l.sqlite3",
        "gate",
        "--journals",
        str(path),
        "--junit",
        str(tmp_path / "g.xml"),
    )
    assert gate.returncode == 2
    xml = (tmp_path / "g.xml").read_text()
    assert 'message="run aborted: stopped by http-error-ratio (breach)' in xml
