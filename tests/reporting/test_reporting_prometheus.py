"""End to end with a real Prometheus: a metric crosses its tolerance during the method,
`gameday run` journals it, `gameday report` charts it and `gameday gate` quotes it."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from support.exporter import start_exporter
from support.gameday_cli import cli_env, run_gameday
from support.harness import gameday_argv

from chaos_ext._servers import prometheus
from chaos_ext.reporting.model import view_of


def _prom(name: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {
        "type": "probe", "name": name,
        "provider": {"type": "python", "module": "chaos_ext.prometheus.probes", "func": func,
                     "arguments": arguments},
    }  # fmt: skip


def _experiment(metric: str) -> dict[str, Any]:
    latency = _prom("latency-ms", "query_value", expr=metric)
    latency["tolerance"] = {"type": "range", "range": [0, 100]}
    return {
        "title": "latency stays under 100 ms",
        "description": "the test raises the metric once the method starts",
        "configuration": {"prometheus_url": "http://127.0.0.1:9"},  # --var sets the real one
        "steady-state-hypothesis": {"title": "fast enough", "probes": [latency]},
        "method": [
            {"type": "probe", "name": "wait", "provider": {
                "type": "process", "path": "sleep", "arguments": "5", "timeout": 30}},
            _prom("window", "query_stats", expr=metric, window="10s", step="1s"),
        ],
    }  # fmt: skip


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _run_raising_the_metric(tmp: Path, path: Path, url: str, gauge: Any) -> str:
    argv = gameday_argv("run", "--journal", str(tmp / "journal.json"), "--var",
                        f"prometheus_url={url}", "--hypothesis-strategy", "continuously",
                        "--hypothesis-frequency", "0.5", str(path))  # fmt: skip
    proc = subprocess.Popen(argv, env=cli_env(tmp / "ledger.sqlite3"), cwd=tmp, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    output = []
    try:
        lines = _lines(proc)
        while (line := lines.get(timeout=120)) != "":
            output.append(line)
            if "▶ method" in line:
                gauge.set(450)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 1, "".join(output)
    return "".join(output)


def test_a_prometheus_metric_crossing_its_tolerance_is_charted_and_quoted(tmp_path: Path) -> None:
    exporter = start_exporter()
    try:
        metric = f"t_latency_ms_{uuid.uuid4().hex[:8]}"
        gauge = exporter.gauge(metric)
        gauge.set(20)
        with prometheus.start(targets=[exporter.target], scrape_interval="1s") as prom:
            prom.wait_scraped(timeout=30)
            path = tmp_path / "latency.json"
            path.write_text(json.dumps(_experiment(metric)))
            _run_raising_the_metric(tmp_path, path, prom.url, gauge)
    finally:
        exporter.stop()
    journal = json.loads((tmp_path / "journal.json").read_text())
    series = {s.name: s for s in view_of(journal).series}
    assert series["latency-ms"].values[0] == 20 and series["latency-ms"].values[-1] == 450
    assert series["window p99"].values == [450]

    ledger = tmp_path / "ledger.sqlite3"
    report = run_gameday(tmp_path, ledger, "report", "journal.json", "-o", "r")
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    assert html.count("<svg") == len(series) == 4  # latency-ms, window p50/p95/p99
    summary = (tmp_path / "r" / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("| latency-ms |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1:3] == ["in [0, 100]", "20 ✓"]
    assert "out of tolerance, 20…450 ✗" in cells[3]
    assert cells[4] == "450 ✗ **out of tolerance**"

    gate = run_gameday(tmp_path, ledger, "gate", "--journals", "journal.json", "--junit", "g.xml")
    assert gate.returncode == 1, gate.stderr
    root = ET.parse(tmp_path / "g.xml").getroot()  # noqa: S314 - our own file
    after = root.find(".//testcase[@name='latency-ms [after]']/failure")
    assert after is not None
    assert after.get("message", "").startswith("measured 450 at +")
    assert after.get("message", "").endswith("tolerance in [0, 100]")
