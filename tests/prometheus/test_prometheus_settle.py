"""Settling (``gameday run --settle``) against a real Prometheus.

The steady state is a gauge scraped every second from an exporter this test
controls; the fault is a real network namespace (checked with ``ip netns``).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.exporter import Exporter
from support.harness import netns_list

from chaos_ext._core.ledger import Ledger
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

Run = Callable[..., subprocess.CompletedProcess[str]]
HEALTHY_AFTER_S = 10.0


def _experiment(prom_url: str, gauge: str, netns: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": "settle before injecting",
        "description": "the service is healthy only after a while",
        "configuration": {"prometheus_url": prom_url, "prometheus_timeout_seconds": 5},
        "steady-state-hypothesis": {
            "title": "healthy",
            "probes": [
                {
                    "type": "probe",
                    "name": "service-healthy",
                    "tolerance": {"type": "range", "range": [0.5, 1.5]},
                    "provider": {
                        "type": "python",
                        "module": "chaos_ext.prometheus.probes",
                        "func": "query_value",
                        "arguments": {"expr": gauge},
                    },
                }
            ],
        },
        "method": [
            {
                "type": "action",
                "name": "make-a-namespace",
                "provider": {
                    "type": "python",
                    "module": "support.faultkit",
                    "func": "create_netns",
                    "arguments": {"name": netns},
                },
            }
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "remove-the-namespace",
                "provider": {
                    "type": "python",
                    "module": "support.faultkit",
                    "func": "remove_netns",
                    "arguments": {"name": netns},
                },
            }
        ],
        **extra,
    }


def test_settle_waits_until_the_metric_is_healthy_then_runs(
    gameday: Run,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    prom: PrometheusServer,
    exporter: Exporter,
    metric: Callable[[str], str],
    netns_name: str,
    ledger_path: Path,
) -> None:
    name = metric("healthy")
    gauge = exporter.gauge(name)
    gauge.set(0)
    prom.wait_scraped(timeout=30)
    path = write_experiment(_experiment(prom.url, name, netns_name))
    flip = threading.Timer(HEALTHY_AFTER_S, gauge.set, args=(1,))
    flip.start()
    try:
        run = gameday("run", "--settle", "60", "--journal", "journal.json", str(path), timeout=180)
    finally:
        flip.cancel()
    assert run.returncode == 0, run.stdout + run.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    settle = journal["gameday"]["settle"]
    assert settle["settled"] is True and settle["attempts"] > 1
    # it waited for the flip (minus the process start-up), not the whole minute
    assert HEALTHY_AFTER_S - 4 <= settle["waited_s"] <= 45, settle
    assert journal["gameday"]["outcome"] == "held"
    assert [r["status"] for r in journal["run"]] == ["succeeded"]  # the fault did run
    assert netns_name not in netns_list()  # ... and was rolled back
    assert "settling" in run.stderr and "settled" in run.stderr
    assert Ledger(ledger_path).open_entries() == []


def test_a_system_that_never_settles_is_unsteady_and_injects_nothing(
    gameday: Run,
    write_experiment: Callable[..., Path],
    tmp_path: Path,
    prom: PrometheusServer,
    exporter: Exporter,
    metric: Callable[[str], str],
    netns_name: str,
    ledger_path: Path,
) -> None:
    name = metric("never_healthy")
    exporter.gauge(name).set(0)
    prom.wait_scraped(timeout=30)
    settings = {"extensions": [{"name": "gameday", "settle_seconds": 4}]}
    path = write_experiment(_experiment(prom.url, name, netns_name, **settings))
    run = gameday("run", "--journal", "journal.json", str(path), timeout=120)
    assert run.returncode == 4, run.stdout + run.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["gameday"]["outcome"] == "unsteady"
    assert journal["gameday"]["settle"]["settled"] is False
    assert journal["run"] == [] and journal["rollbacks"] == []
    assert "service-healthy" in run.stderr and "nothing will be injected" in run.stderr
    assert Ledger(ledger_path).history() == [] and netns_name not in netns_list()


def test_a_bad_settle_value_is_invalid_input(
    gameday: Run, write_experiment: Callable[..., Path], netns_name: str
) -> None:
    settings = {"extensions": [{"name": "gameday", "settle_seconds": "soon"}]}
    path = write_experiment(_experiment("http://127.0.0.1:9", "up", netns_name, **settings))
    run = gameday("run", str(path))
    assert run.returncode == 3, run.stdout + run.stderr
    assert "settle_seconds: expected a number of seconds, got 'soon'" in run.stderr
    negative = gameday("run", "--settle", "-1", str(path))
    assert negative.returncode == 3 and "outside 0..3600" in negative.stderr
