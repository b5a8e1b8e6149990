"""`gameday advise` against an emulated cluster and a real PostgreSQL (max_connections=100).

The issue's case: an ndots:5 Deployment of 30 replicas x pool 5 (150 > 97
usable slots) shows both risks, with the objects and the experiment to run;
a cluster without them (ndots:2, 3 x 5, NodeLocal DNSCache, budgets) shows none.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import k8s_objects as o
from support.advise_cluster import (
    NODES,
    PASSWORD,
    app,
    kube_dns,
    node_local_dns,
    run_advise,
    with_pod_spec,
)
from support.k8s_emulator import EmulatorHandle

pytestmark = pytest.mark.timeout(120)


def _kinds(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {risk["kind"]: risk for risk in report["risks"]}


def test_ndots_and_pool_over_the_ceiling_are_listed_with_their_objects_and_experiment(
    emulator: EmulatorHandle, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES], app("shop", "checkout", replicas=30, pool=5))
    emulator.put(o.pdb("shop", "checkout", match_labels={"app": "checkout"}, max_unavailable=3))
    calls = len(emulator.api_calls())
    code, report, _ = run_advise(capsys, "--db-dsn", dsn, "--pool-env", "DB_POOL_SIZE")
    risks = _kinds(report)
    assert code == 1, report
    assert risks["ndots-5"]["objects"] == ["Deployment shop/checkout (30 pods)"]
    assert risks["ndots-5"]["experiment"] == "experiments/dns-search-amplification.json"
    pool = risks["pool-over-ceiling"]
    assert pool["objects"] == ["Deployment shop/checkout: replicas 30 x pool 5 = 150"]
    assert pool["details"]["ceiling"] == 97  # 100 - superuser_reserved_connections 3
    assert "max_connections 100 - superuser_reserved_connections 3" in pool["evidence"]
    assert pool["experiment"] == "experiments/incidents/01-eks-load-test.json"
    assert pool["var_file"] == "experiments/incidents/vars/cluster.example.yaml"
    assert pool["run"].startswith("gameday run --var-file experiments/incidents/vars/")
    # read-only: GET and LIST only
    assert {c.split()[0] for c in emulator.api_calls()[calls:]} <= {"get", "list"}


def test_a_cluster_without_the_risks_shows_none(
    emulator: EmulatorHandle, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    options = [{"name": "ndots", "value": "2"}]
    checkout = with_pod_spec(
        app("shop", "checkout", replicas=3, pool=5), dnsConfig={"options": options}
    )
    emulator.put([o.node(n) for n in NODES], checkout, kube_dns(), node_local_dns())
    emulator.put(o.pdb("shop", "checkout", match_labels={"app": "checkout"}, max_unavailable=1))
    code, report, _ = run_advise(capsys, "--db-dsn", dsn, "--pool-env", "DB_POOL_SIZE")
    assert (code, report["risks"], report["problems"]) == (0, [], [])
    assert any("sidecar drift: not checked" in n for n in report["notes"])


def test_the_table_names_the_risk_the_objects_and_the_command(
    emulator: EmulatorHandle, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from chaos_ext.cli.main import main  # noqa: PLC0415

    emulator.put([o.node(n) for n in NODES], app("shop", "checkout", replicas=30, pool=5))
    capsys.readouterr()
    code = main(["advise", "--db-dsn", dsn, "--pool-env", "DB_POOL_SIZE", "-n", "shop"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1
    assert "shop/checkout" in err and "dns-search-amplification.json" in err
    assert PASSWORD not in err


def test_kube_dns_with_dnsmasq_and_no_node_local_dns(
    emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES], kube_dns())
    _, report, _ = run_advise(capsys)
    assert _kinds(report)["dns-no-cache"]["objects"] == ["Deployment kube-system/kube-dns"]
    emulator.put(node_local_dns())
    _, report, _ = run_advise(capsys)
    assert "dns-no-cache" not in _kinds(report)


def test_coredns_without_dnsmasq_is_no_dnsmasq_risk(
    emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES], kube_dns(dnsmasq=False))
    code, report, _ = run_advise(capsys)
    assert (code, report["risks"]) == (0, [])


def test_hpa_max_replicas_and_an_annotation_give_the_peak(
    emulator: EmulatorHandle, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    objs = app("shop", "api", replicas=3)
    objs[0]["metadata"]["annotations"] = {"example.com/db-pool": "10"}
    hpa = o.hpa("shop", "api", target="api", min_replicas=3, max_replicas=12, current=3, desired=3)
    emulator.put([o.node(n) for n in NODES], objs, hpa)
    args = ["--db-dsn", dsn, "--pool-annotation", "example.com/db-pool", "-n", "shop"]
    _, report, _ = run_advise(capsys, *args)
    pool = _kinds(report)["pool-over-ceiling"]
    assert pool["objects"] == ["Deployment shop/api: HPA api maxReplicas 12 x pool 10 = 120"]
    # 3 x 10 without the autoscaler's maximum: under 97
    emulator.call(
        lambda c: c.remove(("autoscaling", "v2", "horizontalpodautoscalers"), "shop", "api")
    )
    _, report, _ = run_advise(capsys, *args)
    assert "pool-over-ceiling" not in _kinds(report)


def test_deployments_over_the_ceiling_together(
    emulator: EmulatorHandle, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES], app("shop", "a", replicas=10, pool=5))
    emulator.put(app("shop", "b", replicas=10, pool=5))
    _, report, _ = run_advise(capsys, "--db-dsn", dsn, "--pool-env", "DB_POOL_SIZE")
    pool = _kinds(report)["pool-over-ceiling"]
    assert pool["details"]["total_connections"] == 100 and len(pool["objects"]) == 2
    assert "together (100 connections)" in pool["evidence"]


def test_single_replica_and_no_budget_on_the_named_pool(
    emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put(
        o.node("eat-0", {"role": "eat-workers"}),
        o.node("sys-0", {"role": "system"}),
        app("shop", "cart", replicas=1, nodes=["eat-0"]),
        app("shop", "web", replicas=3, nodes=["eat-0"]),
        o.pdb("shop", "web", match_labels={"app": "web"}, max_unavailable=1),
        app("ops", "tool", replicas=1, nodes=["sys-0"]),
        o.statefulset("data", "kafka", replicas=3, nodes=["eat-0"]),
    )
    _, report, _ = run_advise(capsys, "--node-label", "role=eat-workers")
    risks = _kinds(report)
    assert risks["single-replica"]["objects"] == ["Deployment shop/cart"]
    assert risks["no-pdb"]["objects"] == ["Deployment shop/cart", "StatefulSet data/kafka"]
    assert risks["no-pdb"]["experiment"] == "experiments/node-drain.json"
    # every node: ops/tool too
    _, report, _ = run_advise(capsys)
    assert "Deployment ops/tool" in _kinds(report)["single-replica"]["objects"]
    # budgets and replicas everywhere: none
    emulator.put(
        o.pdb("shop", "cart", match_labels={"app": "cart"}, max_unavailable=1),
        o.pdb("data", "kafka", match_labels={"app": "kafka"}, max_unavailable=1),
    )
    emulator.call(lambda c: c.remove(("apps", "v1", "deployments"), "shop", "cart"))
    _, report, _ = run_advise(capsys, "--node-label", "role=eat-workers")
    assert {"single-replica", "no-pdb"}.isdisjoint(_kinds(report))


def test_a_missing_kubeconfig_is_one_line(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from chaos_ext.cli.main import main  # noqa: PLC0415

    monkeypatch.delenv("KUBERNETES_HOST", raising=False)
    code = main(["advise", "--kubeconfig", str(tmp_path / "nope")])
    err = capsys.readouterr().err.strip()
    assert code == 3
    assert len(err.splitlines()) == 1 and "does not exist" in err


def test_an_unreachable_database_is_a_problem_and_exit_2(
    emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.put([o.node(n) for n in NODES], app("shop", "api", replicas=2, pool=5))
    dsn = "postgresql://app:s3cret-pw@127.0.0.1:1/shop"
    code, report, _ = run_advise(capsys, "--db-dsn", dsn, "--pool-env", "DB_POOL_SIZE")
    assert code == 2
    assert report["problems"] and "s3cret-pw" not in str(report)
