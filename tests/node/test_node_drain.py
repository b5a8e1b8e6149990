"""drain_nodes against the API emulator over HTTP, with the real kubernetes client."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from support import k8s_objects as o
from support.harness import wait_for
from support.k8s_emulator import EmulatorHandle

from chaos_ext._core.ledger import Ledger
from chaos_ext.errors import KubernetesError, PreflightFailed
from chaos_ext.node._drain_plan import CORDON_ANNOTATION
from chaos_ext.node.actions import drain_nodes, uncordon_drained_nodes

SELECTOR = "role=eat-workers"
FAST = {"backoff_initial_seconds": 0.05, "backoff_max_seconds": 0.2, "pick": "first"}


def _cordoned(emulator: EmulatorHandle) -> set[str]:
    return {n["metadata"]["name"] for n in emulator.items("Node") if n["spec"].get("unschedulable")}


def _pods_on(emulator: EmulatorHandle, node: str) -> list[str]:
    return sorted(
        p["metadata"]["name"] for p in emulator.items("Pod") if p["spec"].get("nodeName") == node
    )


def test_budget_allowing_one_disruption_serialises_evictions(
    emulator: EmulatorHandle, pool: list[str], ledger_path: Path
) -> None:
    emulator.put(o.deployment("shop", "web", replicas=4, nodes=["worker-0"]))
    emulator.put(o.pdb("shop", "web", match_labels={"app": "web"}, max_unavailable=1))

    report = drain_nodes(SELECTOR, count=1, timeout_seconds=30, **FAST)

    assert report["evicted"] == 4 and report["blocked"] == 0
    (node,) = report["nodes"]
    assert node["name"] == "worker-0" and len(node["pods"]) == 4
    # the budget refused while a replacement was not Ready yet: some pods were retried
    assert max(p["attempts"] for p in node["pods"]) > 1
    assert emulator.events("evict-blocked")
    # ...and never were two web pods unavailable at once
    assert emulator.call(lambda c: c.pdb_min_healthy["shop/web"]) >= 3
    evicted = [t for t, _, _ in emulator.events("evicted")]
    gaps = [b - a for a, b in itertools.pairwise(evicted)]
    assert min(gaps) >= 0.15, gaps  # one at a time: each waited for a replacement (0.2 s)
    assert _pods_on(emulator, "worker-0") == []
    replaced = [p for p in emulator.items("Pod", "shop") if p["spec"]["nodeName"] != "worker-0"]
    assert len(replaced) == 4
    assert _cordoned(emulator) == {"worker-0"}
    node0 = emulator.get("Node", None, "worker-0")
    assert node0 and node0["metadata"]["annotations"][CORDON_ANNOTATION] == report["ledger_id"]
    (entry,) = Ledger(ledger_path).open_entries()
    assert entry.recipe["nodes"] == ["worker-0"]


def test_budget_refusal_is_retried_until_the_timeout_never_bypassed(
    emulator: EmulatorHandle, pool: list[str], ledger_path: Path
) -> None:
    emulator.put(o.deployment("shop", "web", replicas=3, nodes=["worker-0"]))
    emulator.put(o.pdb("shop", "web", match_labels={"app": "web"}, min_available=3))
    t0 = time.monotonic()
    with pytest.raises(KubernetesError, match=r"3 pod\(s\) not evicted within timeout_seconds=2"):
        drain_nodes(SELECTOR, count=1, timeout_seconds=2, **FAST)
    assert 1.5 < time.monotonic() - t0 < 10
    assert len(_pods_on(emulator, "worker-0")) == 3  # nothing deleted behind the budget
    assert len(emulator.events("evict-blocked")) > 10  # retried with backoff all along
    assert _cordoned(emulator) == set()  # the failed drain undid its cordon at once
    assert Ledger(ledger_path).open_entries() == []


def test_force_deletes_past_the_budget_at_the_timeout(
    emulator: EmulatorHandle, pool: list[str]
) -> None:
    emulator.put(o.deployment("shop", "web", replicas=2, nodes=["worker-0"]))
    emulator.put(o.pdb("shop", "web", match_labels={"app": "web"}, min_available=2))
    report = drain_nodes(SELECTOR, count=1, timeout_seconds=1.5, force=True, **FAST)
    outcomes = {p["outcome"] for p in report["nodes"][0]["pods"]}
    assert outcomes == {"deleted"}
    assert "budget bypassed" in report["nodes"][0]["pods"][0]["reason"]
    assert emulator.events("evicted") == []  # deleted, not evicted
    assert _pods_on(emulator, "worker-0") == []


def test_daemonset_and_mirror_pods_are_skipped(emulator: EmulatorHandle, pool: list[str]) -> None:
    emulator.put(o.daemonset("kube-system", "kube-proxy", nodes=pool))
    mirror = o.pod(
        "etcd-worker-0",
        "kube-system",
        node_name="worker-0",
        labels={},
        spec={"containers": [{"name": "etcd", "image": "etcd:3.5"}]},
        annotations={"kubernetes.io/config.mirror": "7c1f"},
    )
    emulator.put(mirror, o.deployment("shop", "web", replicas=1, nodes=["worker-0"]))

    report = drain_nodes(SELECTOR, count=1, timeout_seconds=20, **FAST)

    pods = {p["name"]: p for p in report["nodes"][0]["pods"]}
    skipped = {name for name, p in pods.items() if p["outcome"] == "skipped"}
    assert "etcd-worker-0" in skipped
    assert any(name.startswith("kube-proxy-") for name in skipped)
    assert report["skipped"] == 2 and report["evicted"] == 1
    left = _pods_on(emulator, "worker-0")
    assert "etcd-worker-0" in left and any(n.startswith("kube-proxy-") for n in left)
    evicted = {target for _, _, target in emulator.events("evicted")}
    assert not any("kube-proxy" in t or "etcd" in t for t in evicted)


@pytest.mark.parametrize("flag", ["force", "delete_emptydir_data"])
def test_pods_needing_a_flag_refuse_before_any_change(
    emulator: EmulatorHandle, pool: list[str], ledger_path: Path, flag: str
) -> None:
    if flag == "force":
        blocker = o.pod(
            "debug-shell",
            "shop",
            node_name="worker-0",
            labels={},
            spec={"containers": [{"name": "sh", "image": "busybox"}]},
        )
    else:
        blocker = o.deployment("shop", "cache", replicas=1, nodes=["worker-0"])
        blocker[2]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    emulator.put(blocker, o.deployment("shop", "web", replicas=2, nodes=["worker-0"]))

    with pytest.raises(PreflightFailed, match=f"pass {flag}=true"):
        drain_nodes(SELECTOR, count=1, timeout_seconds=10, **FAST)
    assert _cordoned(emulator) == set()
    assert emulator.events() == []
    assert Ledger(ledger_path).history() == []

    report = drain_nodes(SELECTOR, count=1, timeout_seconds=10, **{flag: True}, **FAST)
    assert report["evicted"] == 3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"count": 2}, r"refusing to drain 2 of 3 Ready node\(s\).*at most 1"),
        ({"percent": 100, "max_fraction": 1.0}, "every Ready node"),
        ({"count": 1, "protected_namespaces": ["payments"]}, "protected namespaces"),
    ],
)
def test_blast_radius_refusal_changes_nothing(
    emulator: EmulatorHandle,
    pool: list[str],
    ledger_path: Path,
    arguments: dict[str, object],
    message: str,
) -> None:
    emulator.put(o.deployment("payments", "api", replicas=1, nodes=["worker-0"]))
    with pytest.raises(PreflightFailed, match=message):
        drain_nodes(SELECTOR, timeout_seconds=10, **FAST, **arguments)  # type: ignore[arg-type]
    assert _cordoned(emulator) == set()
    assert emulator.events() == []
    assert Ledger(ledger_path).history() == []


def test_an_already_cordoned_node_counts_against_the_radius(
    emulator: EmulatorHandle, pool: list[str]
) -> None:
    emulator.put(o.node("worker-9", {"role": "eat-workers"}, unschedulable=True))
    emulator.put([o.node(f"worker-{i}", {"role": "eat-workers"}) for i in (3, 4)])
    # 6 Ready nodes, 1 already cordoned: 2 may be disrupted, so 1 more at most
    with pytest.raises(PreflightFailed, match=r"\(1 already cordoned\)"):
        drain_nodes(SELECTOR, count=2, **FAST)
    drain_nodes(SELECTOR, count=1, **FAST)
    assert _cordoned(emulator) == {"worker-0", "worker-9"}


@pytest.mark.rolls_back("node-drain")
def test_undo_uncordons_exactly_what_the_drain_cordoned(
    emulator: EmulatorHandle, pool: list[str], ledger_path: Path
) -> None:
    more = [o.node(f"worker-{i}", {"role": "eat-workers"}) for i in range(3, 9)]
    emulator.put(more, o.node("worker-9", {"role": "eat-workers"}, unschedulable=True))
    emulator.put(o.deployment("shop", "web", replicas=6, nodes=pool))

    report = drain_nodes(SELECTOR, count=2, **FAST)
    drained = {n["name"] for n in report["nodes"]}
    assert drained == {"worker-0", "worker-1"}
    assert _cordoned(emulator) == drained | {"worker-9"}

    result = uncordon_drained_nodes()
    assert result["undone"] == 1
    assert "worker-0: uncordoned" in result["faults"][0]["note"]
    assert _cordoned(emulator) == {"worker-9"}  # cordoned by someone else: left alone
    node0 = emulator.get("Node", None, "worker-0")
    assert node0 and CORDON_ANNOTATION not in (node0["metadata"].get("annotations") or {})
    assert uncordon_drained_nodes() == {"undone": 0, "faults": [], "left_alone": []}  # idempotent
    assert Ledger(ledger_path).open_entries() == []


def test_uncordon_after_a_duration(emulator: EmulatorHandle, pool: list[str]) -> None:
    drain_nodes(SELECTOR, count=1, uncordon_after_seconds=0.5, **FAST)
    assert _cordoned(emulator) == {"worker-0"}
    wait_for(lambda: _cordoned(emulator) == set(), 10, "the timed uncordon")
