"""Alert times are Prometheus's own (issue 26 item 3), against a real Prometheus that
loads the rule and evaluates it every second.

* ``--abort-on prometheus-alerts``: "firing since" is ``activeAt`` + ``for`` on the
  rule group's schedule, "pending since" is ``activeAt`` (it was shown as firing since).
* a rule file evaluated by gameday, whose alert was already pending longer than
  ``for`` when the watch started: the replay finds the real first-true time, not
  "now - for".
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.exporter import Exporter
from support.harness import cli_env, gameday_argv
from support.promquery import raw_query

from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

EVAL_S = 1.0  # Prometheus's evaluation interval here (and the watch's for a rule file)
FOR_S = 10
RULES = """\
groups:
  - name: gameday-times
    rules:
      - alert: GamedayTimes
        expr: {metric} > 0
        for: {for_s}s
        labels: {{severity: page}}
"""


@pytest.fixture(scope="module")
def metric_name() -> str:
    return f"t_alert_times_{int(time.time())}"


@pytest.fixture(scope="module")
def gauge(exporter: Exporter, metric_name: str) -> Any:
    return exporter.gauge(metric_name)


@pytest.fixture(scope="module")
def rule_file(tmp_path_factory: pytest.TempPathFactory, metric_name: str) -> Path:
    path = tmp_path_factory.mktemp("rules") / "times.yaml"
    path.write_text(RULES.format(metric=metric_name, for_s=FOR_S))
    return path


@pytest.fixture(scope="module")
def prom_rules(exporter: Exporter, rule_file: Path) -> Iterator[PrometheusServer]:
    with prometheus.start(
        targets=[exporter.target], rule_files=[rule_file], scrape_interval="1s"
    ) as server:
        server.wait_scraped(timeout=30)
        yield server


def _unix(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _first(prom: PrometheusServer, expr: str, *, true: bool, timeout: float = 30) -> float:
    """When Prometheus first answers ``expr`` with a series (``true``) or with none."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if bool(raw_query(prom, expr)["result"]) is true:
            return time.time()
        time.sleep(0.1)
    raise AssertionError(f"{expr} never became {true}")


def _run(tmp: Path, ledger: Path, prom_url: str, *abort: str) -> tuple[dict[str, Any], str]:
    experiment = {
        "title": "alert times",
        "description": "issue 26 item 3",
        "configuration": {"prometheus_url": prom_url},
        "method": [
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "60", "timeout": 90},
            }
        ],
    }
    path = tmp / "experiment.json"
    path.write_text(json.dumps(experiment))
    done = subprocess.run(
        gameday_argv("run", "--journal", str(tmp / "journal.json"), *abort, str(path)),
        env=cli_env(ledger),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    return json.loads((tmp / "journal.json").read_text()), done.stderr


def test_prometheus_alerts_firing_since_is_pending_since_plus_for(
    ledger_path: Path,
    tmp_path: Path,
    gauge: Any,
    prom_rules: PrometheusServer,
    metric_name: str,
) -> None:
    _first(prom_rules, f"{metric_name} > 0", true=False)
    gauge.set(1)
    try:
        watch = ("--abort-on", "prometheus-alerts", "--alerts", "alertname=GamedayTimes")
        journal, output = _run(tmp_path, ledger_path, prom_rules.url, *watch)
        (state,) = raw_query(prom_rules, 'ALERTS_FOR_STATE{alertname="GamedayTimes"}')["result"]
    finally:
        gauge.set(0)
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["condition"] == "GamedayTimes", output
    pending, firing = _unix(fired["alert"]["pending_since"]), _unix(fired["alert"]["since"])
    print(f"pending since {pending:.0f}, firing since {firing:.0f}")  # noqa: T201
    assert abs(pending - float(state["value"][1])) < 1.0  # Prometheus's own activeAt
    assert FOR_S <= firing - pending <= FOR_S + EVAL_S + 1.0  # iso seconds: +1 rounding
    assert f"pending since {fired['alert']['pending_since']}" in fired["detail"]


def test_a_replayed_rule_keeps_the_real_pending_time(
    ledger_path: Path,
    tmp_path: Path,
    gauge: Any,
    prom_rules: PrometheusServer,
    metric_name: str,
    rule_file: Path,
) -> None:
    _first(prom_rules, f"{metric_name} > 0", true=False)  # the other test's alert is over
    gauge.set(1)
    try:
        first_true = _first(prom_rules, f"{metric_name} > 0", true=True)
        time.sleep(FOR_S + 3)  # pending, then firing, longer than `for` before the watch
        journal, output = _run(tmp_path, ledger_path, prom_rules.url, "--abort-on", str(rule_file))
    finally:
        gauge.set(0)
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["condition"] == "GamedayTimes", output
    active, fired_at = fired["alert"]["active_at_unix"], fired["alert"]["fired_at_unix"]
    started = _unix(journal["start"])
    print(  # noqa: T201 - the figures the docs quote
        f"first true {first_true:.2f}, replayed pending since {active:.2f}, "
        f"firing since {fired_at:.2f}, run started {started:.2f}"
    )
    assert started - active > FOR_S  # pending longer than `for` when the run began
    assert abs(active - first_true) <= EVAL_S + 1.0  # a scrape + a step, not now - for
    assert abs(fired_at - active - FOR_S) <= EVAL_S
