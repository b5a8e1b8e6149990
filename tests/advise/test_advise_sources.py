"""`gameday advise`'s other sources: the sidecar injector, Envoy, a journal, Prometheus."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import istio_fixtures as istio
from support import k8s_objects as o
from support.advise_cluster import NODES, app, run_advise
from support.envoy_dumps import COMPLIANT, DEFAULTS
from support.exporter import Exporter, start_exporter
from support.k8s_emulator import EmulatorHandle

from chaos_ext._products.advise.fetch import COREDNS_QUERIES
from chaos_ext._products.sandbox.servers import prometheus
from chaos_ext._products.sandbox.servers.prometheus import PrometheusServer

pytestmark = pytest.mark.timeout(180)


def _kinds(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {risk["kind"]: risk for risk in report["risks"]}


def test_sidecars_drifted_from_the_injector_template(
    emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = istio.injector_values(tag="1.22.3"), istio.injector_values(tag="1.23.1")
    emulator.put([o.node(n) for n in NODES], istio.injector_configmap(old))
    emulator.put(istio.mesh_deployment("shop", "web", replicas=3, nodes=NODES, values=old))
    _, report, _ = run_advise(capsys, "-n", "shop")
    assert "sidecar-drift" not in _kinds(report)
    emulator.put(istio.injector_configmap(new))  # the injector upgraded, the pods not restarted
    code, report, _ = run_advise(capsys, "-n", "shop")
    drift = _kinds(report)["sidecar-drift"]
    assert code == 1 and drift["objects"][0].startswith("Deployment shop/web: 3 pod(s); image:")
    assert drift["experiment"] == "experiments/sidecar-template-change.json"


def test_envoy_audit_failures_are_a_risk_and_a_compliant_edge_is_not(
    emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES])
    _, report, _ = run_advise(capsys, "--envoy", str(DEFAULTS))
    envoy = _kinds(report)["envoy-audit"]
    assert "35 check(s) of the Envoy edge audit fail" in envoy["evidence"]
    assert any(obj.startswith("escaped-slashes (0.0.0.0_8080)") for obj in envoy["objects"])
    code, report, _ = run_advise(capsys, "--envoy", str(COMPLIANT))
    assert (code, report["risks"]) == (0, [])


def _journal(path: Path, *, refused_at: int | None, in_use: int = 3) -> Path:
    """A journal's exhaust_connections step, its output in the shape the holder reports."""
    output = {
        "target": "max",
        "opened": refused_at or 40,
        "stopped_by": "limit" if refused_at else "target",
        "refused": refused_at is not None,
        "refused_at": refused_at,
        "error_text": "sorry, too many clients already" if refused_at else None,
        "max_connections": 100,
        "reserved_connections": 3,
        "in_use_before": in_use,
    }
    step = {
        "activity": {
            "type": "action",
            "name": "cap-the-database-connections",
            "provider": {
                "type": "python",
                "module": "chaos_ext.db.actions",
                "func": "exhaust_connections",
            },
        },
        "status": "succeeded",
        "output": output,
    }
    path.write_text(json.dumps({"status": "completed", "run": [step]}))
    return path


def test_the_ceiling_measured_in_a_journal_lowers_the_servers(
    emulator: EmulatorHandle, dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES], app("shop", "api", replicas=12, pool=5))
    base = ["--pool-env", "DB_POOL_SIZE", "-n", "shop"]
    _, report, _ = run_advise(capsys, "--db-dsn", dsn, *base)  # 60 < 97
    assert "pool-over-ceiling" not in _kinds(report)
    journal = _journal(tmp_path / "journal.json", refused_at=52)  # 52 + 3 others = 55 < 60
    _, report, _ = run_advise(capsys, "--db-dsn", dsn, "--journal", str(journal), *base)
    pool = _kinds(report)["pool-over-ceiling"]
    assert pool["details"]["ceiling"] == 55
    assert "exhaust_connections refused at 52" in pool["evidence"] and "also 97" in pool["evidence"]
    # the journal alone is enough
    _, report, _ = run_advise(capsys, "--journal", str(journal), *base)
    assert _kinds(report)["pool-over-ceiling"]["details"]["ceiling"] == 55
    # a hold that reached its target measured nothing
    calm = _journal(tmp_path / "calm.json", refused_at=None)
    _, report, _ = run_advise(capsys, "--journal", str(calm), *base)
    assert any("no exhaust_connections hold was refused" in n for n in report["notes"])
    assert any("pool size: not checked" in n for n in report["notes"])


def test_a_journal_that_is_not_json_is_invalid_input(
    emulator: EmulatorHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run_advise(capsys, "--pool-env", "DB_POOL_SIZE", "--journal", str(bad))
    assert code == 3 and "cannot read it as JSON" in err


@pytest.fixture(scope="module")
def coredns() -> Iterator[tuple[Exporter, PrometheusServer]]:
    exporter = start_exporter()
    with prometheus.start(targets=[exporter.target], scrape_interval="1s") as server:
        yield exporter, server
    exporter.stop()


def test_prometheus_names_the_names_pods_resolve_most(
    emulator: EmulatorHandle,
    coredns: tuple[Exporter, PrometheusServer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    exporter, server = coredns
    requests = exporter.counter("coredns_dns_requests", ["server", "zone", "type", "name"])
    hot = "api.payments.example.com.shop.svc.cluster.local."
    cold = "login.example.com."
    server.wait_scraped(timeout=30)
    emulator.put([o.node(n) for n in NODES], app("shop", "checkout", replicas=2))
    deadline = time.monotonic() + 40
    evidence = ""
    while time.monotonic() < deadline:
        requests.labels("dns://:53", ".", "A", hot).inc(500)
        requests.labels("dns://:53", ".", "A", cold).inc(5)
        _, report, _ = run_advise(capsys, "--prometheus-url", server.url)
        ndots = _kinds(report)["ndots-5"]
        evidence = ndots["evidence"]
        if hot in evidence:
            break
        time.sleep(1)
    assert f"CoreDNS's most asked last hour: {hot}" in evidence, evidence
    assert ndots["details"]["coredns"]["query"] == COREDNS_QUERIES[0]


def test_prometheus_without_coredns_metrics_says_so(
    emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES], app("shop", "checkout", replicas=2))
    with prometheus.start(targets=[]) as empty:
        _, report, _ = run_advise(capsys, "--prometheus-url", empty.url)
    assert any("no coredns_dns_requests_total" in n for n in report["notes"]), report
    assert _kinds(report)["ndots-5"]["details"]["coredns"]["absent"] is True
