"""Continuous abort conditions under `gameday run --abort-on`, against a real Prometheus.

The method holds a real fault (a port held by a helper, recorded in the ledger)
and then waits; the test pushes a metric over the line (or kills Prometheus)
and measures when the rollback ran.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from support.exporter import Exporter
from support.harness import cli_env, gameday_argv, wait_for
from support.promquery import wait_value

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port

SCRAPE_INTERVAL_S = 1.0


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _plan(tmp: Path, metric: str, **extra: Any) -> Path:
    plan = {
        "interval_seconds": 0.5,
        "unreachable_after": 2,
        "probes": {
            "test-error-ratio": {
                "description": "error ratio served by the test exporter",
                "watches": "the test pushing it over the line",
                "promql": "max(${metric})",
                "parameters": {"metric": {"kind": "name"}},
                "tolerance": {"op": "<", "threshold": 0.05},
            }
        },
        "conditions": [{"probe": "test-error-ratio", "parameters": {"metric": metric}}],
        **extra,
    }
    path = tmp / "abort.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def _experiment(tmp: Path, prom_url: str, port: int, wait_s: int) -> Path:
    def py(name: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
        return {
            "type": "action",
            "name": name,
            "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
        }

    experiment = {
        "title": "abort on breach",
        "description": "holds a port, waits; the abort watch must cut it short",
        "configuration": {"prometheus_url": prom_url},
        "method": [
            py("hold-a-port", "support.faultkit", "hold_port", port=port, seconds=120),
            {
                "type": "probe",
                "name": "wait",
                "provider": {
                    "type": "process",
                    "path": "sleep",
                    "arguments": str(wait_s),
                    "timeout": 120,
                },
            },
        ],
        "rollbacks": [py("mark-rollback", "support.timekit", "mark_time", path=str(tmp / "rb"))],
    }
    path = tmp / "experiment.json"
    path.write_text(json.dumps(experiment))
    return path


def _start(ledger: Path, tmp: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp / "journal.json"), *args),
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], tmp: Path) -> tuple[dict[str, Any], str]:
    output, _ = proc.communicate(timeout=90)
    return json.loads((tmp / "journal.json").read_text()), output


def test_breach_interrupts_and_rollback_completes_within_two_scrapes(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("error_ratio")
    gauge = exporter.gauge(name)
    gauge.set(0.01)
    wait_value(prom, name, 0.01)
    port = free_port()
    experiment = _experiment(tmp_path, prom.url, port, wait_s=60)
    proc = _start(ledger_path, tmp_path, "--abort-on", str(_plan(tmp_path, name)), str(experiment))
    try:
        wait_for(lambda: _port_open(port), 30, "the fault injected")
        time.sleep(1.5)  # a few healthy checks first
        assert proc.poll() is None, "the run ended before the breach"
        gauge.set(0.2)
        breach = time.time()
        journal, output = _finish(proc, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
    rolled_back = float((tmp_path / "rb").read_text())
    latency = rolled_back - breach
    sys.stderr.write(f"\nrollback completed {latency:.3f} s after the breach\n")
    assert proc.returncode == 2, output
    assert latency <= 2 * SCRAPE_INTERVAL_S + 1.0, (
        f"rollback {latency:.3f} s after breach\n{output}"
    )
    assert journal["status"] == "aborted"
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["reason"] == "breach" and fired["condition"] == "test-error-ratio"
    assert fired["value"] == 0.2
    assert breach <= fired["at_unix"] <= rolled_back
    assert journal["gameday"]["abort"]["checks"] >= 3
    assert [r["status"] for r in journal["rollbacks"]] == ["succeeded"]
    assert {s["kind"] for s in journal["gameday"]["sweep"]} == {"test-port"}
    assert not _port_open(port)
    assert Ledger(ledger_path).open_entries() == []
    assert "abort condition test-error-ratio fired" in output


def test_prometheus_killed_mid_run_aborts_and_rolls_back(
    ledger_path: Path, tmp_path: Path, exporter: Exporter, metric: Callable[[str], str]
) -> None:
    name = metric("steady")
    exporter.gauge(name).set(0.0)
    port = free_port()
    with prometheus.start(targets=[exporter.target], scrape_interval="1s") as own:
        own.wait_scraped(timeout=30)
        wait_value(own, name, 0.0)
        experiment = _experiment(tmp_path, own.url, port, wait_s=60)
        plan = _plan(tmp_path, name)
        proc = _start(ledger_path, tmp_path, "--abort-on", str(plan), str(experiment))
        try:
            wait_for(lambda: _port_open(port), 30, "the fault injected")
            time.sleep(1.0)
            assert proc.poll() is None
            own.kill()
            killed = time.time()
            journal, output = _finish(proc, tmp_path)
        finally:
            if proc.poll() is None:
                proc.kill()
    rolled_back = float((tmp_path / "rb").read_text())
    assert proc.returncode == 2, output
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["reason"] == "unreachable" and "unreachable" in fired["detail"]
    # two failed checks, 500 ms apart, then the rollback
    assert rolled_back - killed < 2 * 0.5 + 2.0, output
    assert not _port_open(port)
    assert Ledger(ledger_path).open_entries() == []


def test_no_breach_lets_the_run_finish_and_records_the_watch(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("calm")
    exporter.gauge(name).set(0.0)
    wait_value(prom, name, 0.0)
    experiment = _experiment(tmp_path, prom.url, free_port(), wait_s=2)
    proc = _start(ledger_path, tmp_path, "--abort-on", str(_plan(tmp_path, name)), str(experiment))
    journal, output = _finish(proc, tmp_path)
    assert proc.returncode == 0, output
    watch = journal["gameday"]["abort"]
    assert watch["fired"] is None and watch["checks"] >= 3
    assert watch["last_values"] == {"test-error-ratio": 0.0}
    assert watch["conditions"][0]["steady"] == "< 0.05"


def test_a_query_prometheus_rejects_aborts_at_once(
    ledger_path: Path, tmp_path: Path, prom: PrometheusServer
) -> None:
    plan = tmp_path / "bad-query.yaml"
    # valid PromQL syntax (promql-parser accepts it), but Prometheus refuses the regex
    bad_regex = 'label_replace(vector(1), "a", "$1", "b", "(")'
    plan.write_text(
        yaml.safe_dump(
            {
                "conditions": [
                    {"name": "typo", "promql": bad_regex, "tolerance": {"op": "<", "threshold": 1}},
                ]
            }
        )
    )
    experiment = _experiment(tmp_path, prom.url, free_port(), wait_s=30)
    started = time.monotonic()
    proc = _start(ledger_path, tmp_path, "--abort-on", str(plan), str(experiment))
    journal, output = _finish(proc, tmp_path)
    assert proc.returncode == 2, output
    assert time.monotonic() - started < 20
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["reason"] == "error" and "regular expression" in fired["detail"], fired


def test_a_plan_with_a_promql_syntax_error_is_refused_before_anything_runs(
    gameday: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    plan = tmp_path / "typo.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "conditions": [
                    {
                        "name": "typo",
                        "promql": "sum(rate(x[1m])",
                        "tolerance": {"op": "<", "threshold": 1},
                    },
                ]
            }
        )
    )
    experiment = _experiment(tmp_path, "http://127.0.0.1:9", free_port(), wait_s=1)
    result = gameday("run", "--abort-on", str(plan), str(experiment))
    assert result.returncode == 3, result.stderr
    assert "invalid PromQL 'sum(rate(x[1m])': unclosed left parenthesis" in result.stderr
    assert not (tmp_path / "rb").exists()


def test_an_invalid_plan_is_refused_before_anything_runs(
    gameday: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    experiment = _experiment(tmp_path, "http://127.0.0.1:9", free_port(), wait_s=1)
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"conditions": [{"probe": "http-eror-ratio"}]}))
    result = gameday("run", "--abort-on", str(plan), str(experiment))
    assert result.returncode == 3
    assert "did you mean http-error-ratio" in result.stderr + result.stdout
    assert not (tmp_path / "rb").exists()
