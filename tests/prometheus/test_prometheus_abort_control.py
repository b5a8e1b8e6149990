"""The abort control under plain `chaos run`, and the watch's bookkeeping."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.exporter import Exporter
from support.harness import cli_env, wait_for
from support.promquery import wait_value

from chaos_ext._core.prometheus_api.results import Condition
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port
from chaos_ext.controls._plan import AbortCondition, AbortPlan, parse_plan
from chaos_ext.controls._tracker import Tracker
from chaos_ext.errors import EmptyResult, InvalidArgument, PrometheusUnreachable, PromQLError

CHAOS = Path(sys.executable).with_name("chaos")


def test_control_interrupts_plain_chaos_run_and_rollbacks_run(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("ctk_errors")
    gauge = exporter.gauge(name)
    gauge.set(0)
    wait_value(prom, name, 0)
    marker = tmp_path / "started"
    experiment = {
        "title": "chaos run with the gameday abort control",
        "description": "waits; the control must cut it short",
        "configuration": {"prometheus_url": prom.url},
        "runtime": {"rollbacks": {"strategy": "always"}},
        "controls": [
            {
                "name": "abort-on-errors",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.controls.abort",
                    "arguments": {
                        "interval_seconds": 0.5,
                        "conditions": [
                            {
                                "name": "errors",
                                "promql": f"max({name})",
                                "tolerance": {"op": "<", "threshold": 1},
                            }
                        ],
                    },
                },
            }
        ],
        "method": [
            {
                "type": "action",
                "name": "started",
                "provider": {
                    "type": "python",
                    "module": "support.timekit",
                    "func": "mark_time",
                    "arguments": {"path": str(marker)},
                },
            },
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "60", "timeout": 90},
            },
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "mark-rollback",
                "provider": {
                    "type": "python",
                    "module": "support.timekit",
                    "func": "mark_time",
                    "arguments": {"path": str(tmp_path / "rb")},
                },
            }
        ],
    }
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(experiment))
    journal_path = tmp_path / "journal.json"
    proc = subprocess.Popen(
        [
            str(CHAOS),
            "--no-version-check",
            "run",
            "--no-verify-tls",
            "--journal-path",
            str(journal_path),
            str(path),
        ],
        env=cli_env(ledger_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(marker.exists, 30, "the method started")
        time.sleep(1.0)
        gauge.set(5)
        breach = time.time()
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    journal = json.loads(journal_path.read_text())
    assert journal["status"] == "interrupted", output
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["reason"] == "breach" and fired["condition"] == "errors" and fired["value"] == 5
    rolled_back = float((tmp_path / "rb").read_text())
    assert rolled_back - breach <= 3.0


def _plan(**extra: Any) -> AbortPlan:
    conditions = (AbortCondition("errors", "x", Condition("<", 0.05), breaches=2),)
    return AbortPlan(conditions=conditions, interval=1, unreachable_after=3, **extra)


def test_tracker_needs_consecutive_breaches() -> None:
    tracker = Tracker(_plan())
    (errors,) = tracker.plan.conditions
    assert tracker.tick([(errors, 0.5)], 1.0) is None  # one breach: not yet
    assert tracker.tick([(errors, 0.01)], 2.0) is None  # healthy again: streak resets
    assert tracker.tick([(errors, 0.5)], 3.0) is None
    verdict = tracker.tick([(errors, 0.6)], 4.0)
    assert verdict is not None and verdict.reason == "breach" and verdict.value == 0.6
    assert "0.6 is not < 0.05" in verdict.detail


def test_tracker_fail_safe_on_unreachable_streak_and_errors() -> None:
    tracker = Tracker(_plan())
    (errors,) = tracker.plan.conditions
    down = PrometheusUnreachable("Prometheus at http://x unreachable")
    assert tracker.tick([(errors, down)], 1.0) is None
    assert tracker.tick([(errors, down)], 2.0) is None
    assert tracker.tick([(errors, 0.0)], 3.0) is None  # back: streak resets
    assert tracker.tick([(errors, down)], 4.0) is None
    assert tracker.tick([(errors, down)], 5.0) is None
    verdict = tracker.tick([(errors, down)], 6.0)
    assert verdict is not None and verdict.reason == "unreachable"
    # no data is not a breach; a rejected query aborts at once
    tracker = Tracker(_plan())
    assert tracker.tick([(errors, EmptyResult("none"))], 1.0) is None and tracker.no_data == 1
    verdict = tracker.tick([(errors, PromQLError("Prometheus rejected 'x': parse error"))], 2.0)
    assert verdict is not None and verdict.reason == "error"


def test_plan_parsing_uses_the_catalog_and_checks_everything() -> None:
    plan = parse_plan(
        {
            "interval_seconds": 2,
            "conditions": [
                {"probe": "http-error-ratio", "parameters": {"job": "checkout"}},
                {"probe": "nodes-not-ready", "tolerance": {"op": "<=", "threshold": 1}},
            ],
        },
        "test",
    )
    first, second = plan.conditions
    assert 'job="checkout"' in first.expr and first.tolerance.describe() == "< 0.01"
    assert first.if_nan == 0.0
    assert second.tolerance.describe() == "<= 1"
    assert plan.timeout == 2.0 and plan.unreachable_after == 3
    for bad, message in (
        ({"conditions": []}, "non-empty"),
        ({"conditions": [{"probe": "nope-nope"}]}, "no probe"),
        ({"conditions": [{"promql": "up"}]}, "tolerance"),
        ({"conditions": [{"probe": "nodes-not-ready"}], "intervall": "1s"}, "unknown key"),
        ({"conditions": [{"probe": "nodes-not-ready", "breaches": 0}]}, "breaches"),
    ):
        with pytest.raises(InvalidArgument, match=message):
            parse_plan(bad, "test")


def test_free_port_is_free() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
