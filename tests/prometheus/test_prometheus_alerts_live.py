"""Alerts stop real runs: real mixin rules evaluated against a real Prometheus, real
Alertmanager and Prometheus alerts APIs.

Metrics are pushed to a real Pushgateway (Debian's) that the real Prometheus
scrapes every second with ``honor_labels`` (so ``job="kubelet"`` is kept, as the
kubernetes-mixin's rules expect). The method holds a real fault (a port, in the
ledger) and waits; the rollback writes its time.

The rule that must wait for its ``for:`` is the kubernetes-mixin's
``KubePersistentVolumeFillingUp`` (severity critical, ``for: 1m``, unchanged
from tests/prometheus/fixtures/rules/kubernetes-mixin-alerts.yaml).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Gauge, delete_from_gateway, push_to_gateway
from support.harness import cli_env, gameday_argv, wait_for
from support.promquery import raw_query, wait_result
from support.servers import monitoring
from support.servers.monitoring import Alertmanager, Daemon

from chaos_ext._core.ledger import Ledger
from chaos_ext._core.prometheus_api.alertstate import RuleState
from chaos_ext._core.prometheus_api.client import client
from chaos_ext._core.prometheus_api.results import parse_instant
from chaos_ext._core.prometheus_api.rules import load_rules, parse_rule_documents
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer, free_port
from chaos_ext.prometheus import probes

RULES = Path(__file__).parent / "fixtures" / "rules"
K8S = RULES / "kubernetes-mixin-alerts.yaml"
KUBE_PROMETHEUS = RULES / "kubePrometheus-prometheusRule.yaml"
INTERVAL_S = 1.0  # the watch's evaluation interval for a rule file given to --abort-on
PV_RULE = next(
    r
    for r in load_rules(K8S)
    if r.name == "KubePersistentVolumeFillingUp" and r.labels["severity"] == "critical"
)
OWN_RULES = """\
groups:
  - name: gameday-test
    rules:
      - alert: GamedayTestCritical
        expr: gameday_alert_test_value > 0
        labels: {severity: critical}
        annotations: {summary: the test pushed a bad value}
      - alert: GamedayKeepFiring
        expr: gameday_kf_value > 0
        for: 3s
        keep_firing_for: 5s
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pushgateway() -> Iterator[Daemon]:
    with monitoring.start_pushgateway() as pg:
        yield pg


@pytest.fixture(scope="module")
def prom_pg(
    pushgateway: Daemon, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    rules = tmp_path_factory.mktemp("rules") / "own.yaml"
    rules.write_text(OWN_RULES)
    with prometheus.start(
        jobs={"pushgateway": [pushgateway.target]},
        honor_labels=["pushgateway"],
        rule_files=[rules],
        scrape_interval="1s",
    ) as server:
        server.wait_scraped(timeout=30)
        yield server


@pytest.fixture
def alertmanager() -> Iterator[Alertmanager]:
    with monitoring.start_alertmanager() as am:
        yield am


def _push_pvc(pg: Daemon, pvc: str, available: float) -> None:
    """What kubelet exports for one volume claim (100 bytes, ``available`` free)."""
    registry = CollectorRegistry()
    for name, value in (("available", available), ("capacity", 100.0), ("used", 100.0 - available)):
        Gauge(f"kubelet_volume_stats_{name}_bytes", name, registry=registry).set(value)
    push_to_gateway(
        pg.target,
        job="kubelet",
        registry=registry,
        grouping_key={"namespace": "shop", "persistentvolumeclaim": pvc},
    )


def _delete_pvc(pg: Daemon, pvc: str) -> None:
    grouping = {"namespace": "shop", "persistentvolumeclaim": pvc}
    delete_from_gateway(pg.target, job="kubelet", grouping_key=grouping)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _experiment(tmp: Path, prom_url: str, port: int, wait_s: int, **config: str) -> Path:
    def py(name: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
        return {
            "type": "action",
            "name": name,
            "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
        }

    experiment = {
        "title": "alerts stop the run",
        "description": "holds a port and waits",
        "configuration": {"prometheus_url": prom_url, **config},
        "method": [
            py("hold-a-port", "support.faultkit", "hold_port", port=port, seconds=240),
            {
                "type": "probe",
                "name": "wait",
                "provider": {
                    "type": "process",
                    "path": "sleep",
                    "arguments": str(wait_s),
                    "timeout": 240,
                },
            },
        ],
        "rollbacks": [py("mark-rollback", "support.timekit", "mark_time", path=str(tmp / "rb"))],
    }
    path = tmp / "experiment.json"
    path.write_text(json.dumps(experiment))
    return path


def _run(ledger: Path, tmp: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gameday_argv("run", "--journal", str(tmp / "journal.json"), *args),
        env=cli_env(ledger),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(
    proc: subprocess.Popen[str], tmp: Path, timeout: float = 200
) -> tuple[dict[str, Any], str]:
    try:
        output, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return json.loads((tmp / "journal.json").read_text()), output


def _first_true(prom: PrometheusServer, expr: str, timeout: float = 30) -> float:
    """When Prometheus first answers the alert's expression with a series (polled at 10 Hz)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if raw_query(prom, expr)["result"]:
            return time.time()
        time.sleep(0.1)
    raise AssertionError(f"{expr} never returned a series")


def test_a_mixin_alert_aborts_only_after_its_for_and_rolls_back_within_an_interval(
    ledger_path: Path,
    tmp_path: Path,
    pushgateway: Daemon,
    prom_pg: PrometheusServer,
) -> None:
    pvc = "data-for"
    _push_pvc(pushgateway, pvc, available=50)
    wait_result(prom_pg, f'kubelet_volume_stats_available_bytes{{persistentvolumeclaim="{pvc}"}}')
    port = free_port()
    experiment = _experiment(tmp_path, prom_pg.url, port, wait_s=180)
    proc = _run(
        ledger_path,
        tmp_path,
        "--abort-on",
        str(K8S),
        "--alerts",
        "severity=critical",
        str(experiment),
    )
    try:
        wait_for(lambda: _port_open(port), 60, "the fault injected")
        time.sleep(2 * INTERVAL_S)
        _push_pvc(pushgateway, pvc, available=1)  # 1 % free: under the mixin's 3 %
        true_at = _first_true(prom_pg, PV_RULE.expr)
        journal, output = _finish(proc, tmp_path)
    finally:
        _delete_pvc(pushgateway, pvc)
    rolled_back = float((tmp_path / "rb").read_text())
    after_for = rolled_back - (true_at + PV_RULE.for_s)
    print(f"rollback {after_for:+.3f} s after for: elapsed")  # noqa: T201 - the measured margin
    assert proc.returncode == 2, output
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["reason"] == "alert" and fired["condition"] == "KubePersistentVolumeFillingUp"
    alert = fired["alert"]
    assert alert["labels"]["persistentvolumeclaim"] == pvc
    assert alert["labels"]["severity"] == "critical"
    assert alert["fired_at_unix"] - alert["active_at_unix"] >= PV_RULE.for_s
    assert alert["active_at_unix"] >= true_at - 0.5  # pending from the first true evaluation
    assert after_for >= -0.5, f"aborted {after_for:.3f} s before for: elapsed"
    assert after_for <= INTERVAL_S + 1.0, output
    assert not _port_open(port) and Ledger(ledger_path).open_entries() == []
    assert "KubePersistentVolumeFillingUp" in output
    report = subprocess.run(
        gameday_argv("report", str(tmp_path / "journal.json"), "-o", str(tmp_path / "report")),
        env=cli_env(ledger_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stdout + report.stderr
    summary = " ".join((tmp_path / "report" / "summary.md").read_text().split())
    assert "stopped by KubePersistentVolumeFillingUp (alert)" in summary  # which alert ...
    assert f"firing since {alert['fired_at']}" in summary  # ... and when
    assert f"pending since {alert['active_at']}, for: 60s" in summary


def test_an_alert_whose_for_is_longer_than_the_run_does_not_fire_early(
    ledger_path: Path,
    tmp_path: Path,
    pushgateway: Daemon,
    prom_pg: PrometheusServer,
    gameday: Any,
) -> None:
    pvc = "data-long"
    _push_pvc(pushgateway, pvc, available=1)
    try:
        true_at = _first_true(prom_pg, PV_RULE.expr)
        time.sleep(3)  # already pending before the run: the watch must replay that
        port = free_port()
        experiment = _experiment(tmp_path, prom_pg.url, port, wait_s=15)
        result = gameday(
            "run",
            "--journal",
            str(tmp_path / "journal.json"),
            "--abort-on",
            str(K8S),
            "--alerts",
            "severity=critical",
            str(experiment),
        )
    finally:
        _delete_pvc(pushgateway, pvc)
    assert result.returncode == 0, result.stdout + result.stderr
    journal = json.loads((tmp_path / "journal.json").read_text())
    abort = journal["gameday"]["abort"]
    assert abort["fired"] is None and abort["checks"] >= 10
    pending = [a for a in abort["alerts_active"] if a["alert"] == "KubePersistentVolumeFillingUp"]
    assert [a["state"] for a in pending] == ["pending"]
    assert abs(pending[0]["active_at_unix"] - true_at) <= 2 * INTERVAL_S  # replayed, not reset


def test_a_prometheus_rule_manifest_selects_by_name_or_refuses_an_empty_selection(
    ledger_path: Path,
    tmp_path: Path,
    prom_pg: PrometheusServer,
    gameday: Any,
) -> None:
    port = free_port()
    experiment = _experiment(tmp_path, prom_pg.url, port, wait_s=60)
    refused = gameday(
        "run", "--abort-on", str(KUBE_PROMETHEUS), "--alerts", "severity=critical", str(experiment)
    )
    assert refused.returncode == 3
    assert "selects none of its 4 alerts (severities there: none, warning)" in " ".join(
        (refused.stdout + refused.stderr).split()
    )
    assert Ledger(ledger_path).open_entries() == [] and not _port_open(port)
    assert (
        gameday(
            "validate", "--abort-on", str(KUBE_PROMETHEUS), "--alerts", "Watchdog", str(experiment)
        ).returncode
        == 0
    )
    started = time.time()
    watchdog = gameday(
        "run",
        "--journal",
        str(tmp_path / "journal.json"),
        "--abort-on",
        str(KUBE_PROMETHEUS),
        "--alerts",
        "alertname=Watchdog",
        str(experiment),
    )
    assert watchdog.returncode == 2, watchdog.stdout + watchdog.stderr
    fired = json.loads((tmp_path / "journal.json").read_text())["gameday"]["abort"]["fired"]
    assert fired["condition"] == "Watchdog" and fired["alert"]["labels"]["severity"] == "none"
    assert time.time() - started < 40  # vector(1), no for: at the first evaluation


def test_an_alertmanager_alert_matching_the_selector_stops_the_run(
    ledger_path: Path,
    tmp_path: Path,
    prom_pg: PrometheusServer,
    alertmanager: Alertmanager,
) -> None:
    port = free_port()
    experiment = _experiment(
        tmp_path, prom_pg.url, port, wait_s=120, alertmanager_url=alertmanager.url
    )
    proc = _run(
        ledger_path,
        tmp_path,
        "--abort-on",
        "alertmanager",
        "--alerts",
        "severity=critical",
        str(experiment),
    )
    try:
        wait_for(lambda: _port_open(port), 60, "the fault injected")
        alertmanager.post_alert({"alertname": "CoreDNSErrorsHigh", "severity": "warning"})
        time.sleep(3 * INTERVAL_S)
        assert proc.poll() is None, "a warning must not stop a critical-only watch"
        alertmanager.post_alert(
            {"alertname": "KubeAPIDown", "severity": "critical"},
            annotations={"summary": "the API is gone"},
        )
        posted = time.time()
        journal, output = _finish(proc, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
    rolled_back = float((tmp_path / "rb").read_text())
    assert proc.returncode == 2, output
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["condition"] == "KubeAPIDown" and fired["alert"]["source"] == "alertmanager"
    assert "the API is gone" in fired["detail"]
    assert rolled_back - posted <= INTERVAL_S + 1.0
    assert not _port_open(port)


def test_alerts_firing_in_prometheus_stop_the_run(
    ledger_path: Path,
    tmp_path: Path,
    pushgateway: Daemon,
    prom_pg: PrometheusServer,
) -> None:
    registry = CollectorRegistry()
    value = Gauge("gameday_alert_test_value", "test", registry=registry)
    value.set(0)
    push_to_gateway(pushgateway.target, job="gameday-test", registry=registry)
    port = free_port()
    experiment = _experiment(tmp_path, prom_pg.url, port, wait_s=120)
    proc = _run(
        ledger_path,
        tmp_path,
        "--abort-on",
        "prometheus-alerts",
        "--alerts",
        "severity=critical",
        str(experiment),
    )
    try:
        wait_for(lambda: _port_open(port), 60, "the fault injected")
        value.set(1)
        push_to_gateway(pushgateway.target, job="gameday-test", registry=registry)
        journal, output = _finish(proc, tmp_path)
    finally:
        delete_from_gateway(pushgateway.target, job="gameday-test")
    assert proc.returncode == 2, output
    fired = journal["gameday"]["abort"]["fired"]
    assert fired["condition"] == "GamedayTestCritical"
    assert fired["alert"]["source"] == "prometheus"


def test_alerts_quiet_probe(
    pushgateway: Daemon,
    prom_pg: PrometheusServer,
    alertmanager: Alertmanager,
) -> None:
    config = {"prometheus_url": prom_pg.url, "alertmanager_url": alertmanager.url}
    critical = ["severity=critical"]
    assert probes.alerts_quiet([str(K8S)], critical, configuration=config) is True
    pvc = "data-quiet"
    _push_pvc(pushgateway, pvc, available=1)
    try:
        _first_true(prom_pg, PV_RULE.expr)
        # pending (for: 1m not elapsed): quiet, unless pending alerts count
        assert probes.alerts_quiet([str(K8S)], critical, configuration=config) is True
        assert (
            probes.alerts_quiet([str(K8S)], critical, include_pending=True, configuration=config)
            is False
        )
    finally:
        _delete_pvc(pushgateway, pvc)
    assert probes.alerts_quiet([str(KUBE_PROMETHEUS)], ["Watchdog"], configuration=config) is False
    assert (
        probes.alerts_quiet(select=critical, firing=["alertmanager"], configuration=config) is True
    )
    alertmanager.post_alert({"alertname": "KubeletDown", "severity": "critical"})
    assert (
        probes.alerts_quiet(select=critical, firing=["alertmanager"], configuration=config) is False
    )


def test_the_abort_control_takes_alert_rules_under_plain_chaos_run(
    ledger_path: Path,
    tmp_path: Path,
    prom_pg: PrometheusServer,
) -> None:
    chaos = Path(sys.executable).with_name("chaos")
    experiment = {
        "title": "chaos run stopped by a PrometheusRule alert",
        "description": "waits",
        "configuration": {"prometheus_url": prom_pg.url},
        "runtime": {"rollbacks": {"strategy": "always"}},
        "controls": [
            {
                "name": "abort-on-alerts",
                "provider": {
                    "type": "python",
                    "module": "chaos_ext.controls.abort",
                    "arguments": {
                        "alerts": {"rules": [str(KUBE_PROMETHEUS)], "select": "Watchdog"}
                    },
                },
            }
        ],
        "method": [
            {
                "type": "probe",
                "name": "wait",
                "provider": {"type": "process", "path": "sleep", "arguments": "60", "timeout": 90},
            }
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
    started = time.time()
    result = subprocess.run(
        [str(chaos), "--no-version-check", "run", "--journal-path", str(journal_path), str(path)],
        env=cli_env(ledger_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # chaos's own words when it wrote no journal (seen once in a LANES=2 run: an abort that
    # fired while chaos run was still setting up the run)
    assert journal_path.exists(), f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    journal = json.loads(journal_path.read_text())
    assert journal["status"] == "interrupted", result.stdout + result.stderr
    assert journal["gameday"]["abort"]["fired"]["condition"] == "Watchdog"
    assert (tmp_path / "rb").exists() and time.time() - started < 50


def _firing_span(states: list[tuple[float, str]]) -> tuple[float, float]:
    firing = [t for t, state in states if state == "firing"]
    assert firing, states
    return firing[0], firing[-1]


def test_pending_firing_and_keep_firing_for_match_prometheus_itself(
    pushgateway: Daemon,
    prom_pg: PrometheusServer,
) -> None:
    """The same rule, loaded in the real Prometheus (2.42, which has keep_firing_for) and
    evaluated by gameday every second: both fire and stop firing at the same times."""
    rule = next(
        r
        for r in parse_rule_documents([yaml.safe_load(OWN_RULES)], "own")
        if r.name == "GamedayKeepFiring"
    )
    registry = CollectorRegistry()
    value = Gauge("gameday_kf_value", "test", registry=registry)
    prom = client({"prometheus_url": prom_pg.url, "prometheus_timeout_seconds": 2})
    state = RuleState(rule)
    ours: list[tuple[float, str]] = []
    theirs: list[tuple[float, str]] = []

    def observe(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            now = time.time()
            state.evaluate(parse_instant(prom.instant(rule.expr, at=now), rule.expr), now)
            ours.append(
                (
                    now,
                    (state.firing() and "firing") or (state.pending() and "pending") or "inactive",
                )
            )
            listed = [a for a in prom.alerts() if a["labels"].get("alertname") == rule.name]
            theirs.append((now, listed[0]["state"] if listed else "inactive"))
            time.sleep(max(0.0, 0.25 - (time.time() - now)))

    try:
        push_to_gateway(pushgateway.target, job="gameday-kf", registry=registry)
        observe(3)
        value.set(1)
        push_to_gateway(pushgateway.target, job="gameday-kf", registry=registry)
        observe(8)  # pending, then firing after 3 s
        value.set(0)
        push_to_gateway(pushgateway.target, job="gameday-kf", registry=registry)
        observe(10)  # kept firing for 5 s after the expression stops returning it
    finally:
        delete_from_gateway(pushgateway.target, job="gameday-kf")
    (our_start, our_end), (their_start, their_end) = _firing_span(ours), _firing_span(theirs)
    spans = f"ours {our_start:.2f}..{our_end:.2f}, Prometheus {their_start:.2f}..{their_end:.2f}"
    print(f"firing: {spans}")  # noqa: T201 - the measured agreement
    # Prometheus evaluates on its own 1 s schedule and /api/v1/alerts is polled at 4 Hz:
    # the transitions agree within one evaluation interval (+ the poll period)
    assert abs(our_start - their_start) <= 1.25
    assert abs(our_end - their_end) <= 1.25
    assert our_end - our_start >= 5 + 3 - 1.25  # kept firing after the value dropped
