"""``--var alertmanager_url`` / ``--var prometheus_url`` reach the stop-condition watch
without the experiment declaring the key (issue 26 item 4), against a real Alertmanager
and a real Prometheus.

chaoslib keeps only the ``--var`` keys an experiment's ``configuration`` declares, so
the documented command passed ``gameday validate`` and then stopped the run with
"alertmanager_url='' ... refused (exit 3)".
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.exporter import Exporter
from support.harness import cli_env, gameday_argv, wait_for
from support.promquery import wait_value
from support.servers import monitoring
from support.servers.monitoring import Alertmanager

from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer


@pytest.fixture
def alertmanager() -> Iterator[Alertmanager]:
    with monitoring.start_alertmanager() as am:
        yield am


def _experiment(tmp: Path) -> Path:
    """No configuration at all: every URL comes from --var."""
    path = tmp / "experiment.json"
    path.write_text(
        json.dumps(
            {
                "title": "urls from --var",
                "description": "issue 26 item 4",
                "method": [
                    {
                        "type": "action",
                        "name": "mark-start",
                        "provider": {
                            "type": "python",
                            "module": "support.timekit",
                            "func": "mark_time",
                            "arguments": {"path": str(tmp / "started")},
                        },
                        "pauses": {"after": 60},
                    }
                ],
            }
        )
    )
    return path


def _start(tmp: Path, ledger: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp / "journal.json"), *args),
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _aborted_by(proc: subprocess.Popen[str], tmp: Path, condition: str) -> dict[str, Any]:
    try:
        output, _ = proc.communicate(timeout=50)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 2, output
    journal = json.loads((tmp / "journal.json").read_text())
    assert journal["gameday"]["outcome"] == "aborted", output
    fired: dict[str, Any] = journal["gameday"]["abort"]["fired"]
    assert fired["condition"] == condition, fired
    return fired


def test_var_alertmanager_url_reaches_the_watch(
    ledger_path: Path, tmp_path: Path, alertmanager: Alertmanager
) -> None:
    proc = _start(
        tmp_path,
        ledger_path,
        "--var",
        f"alertmanager_url={alertmanager.url}",
        "--abort-on",
        "alertmanager",
        "--alerts",
        "severity=critical",
        str(_experiment(tmp_path)),
    )
    wait_for((tmp_path / "started").exists, 30, "the method")
    alertmanager.post_alert({"alertname": "GamedayVarTest", "severity": "critical"})
    fired = _aborted_by(proc, tmp_path, "GamedayVarTest")
    assert fired["alert"]["source"] == "alertmanager"


def test_var_prometheus_url_reaches_the_watch(
    ledger_path: Path,
    tmp_path: Path,
    exporter: Exporter,
    prom: PrometheusServer,
    metric: Callable[[str], str],
) -> None:
    name = metric("var_url")
    exporter.gauge(name).set(1.0)
    wait_value(prom, name, 1.0)
    plan = tmp_path / "plan.yaml"
    over = {"name": "over", "promql": name, "tolerance": {"op": "<", "threshold": 0.5}}
    plan.write_text(yaml.safe_dump({"interval_seconds": 0.5, "conditions": [over]}))
    started = time.monotonic()
    proc = _start(
        tmp_path,
        ledger_path,
        "--var",
        f"prometheus_url={prom.url}",
        "--abort-on",
        str(plan),
        str(_experiment(tmp_path)),
    )
    fired = _aborted_by(proc, tmp_path, "over")
    assert fired["value"] == 1.0
    assert time.monotonic() - started < 30  # not the 60 s pause
