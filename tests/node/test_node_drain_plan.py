"""The drain's pure decisions: which nodes, which pods, and the blast radius."""

from __future__ import annotations

import random

import pytest
from support import k8s_objects as o

from chaos_ext.errors import PreflightFailed
from chaos_ext.node._drain_plan import (
    NodeInfo,
    PodInfo,
    backoff_delays,
    check_blast_radius,
    check_protected,
    choose_nodes,
    interleave,
    plan_pods,
    refusals,
)


def _nodes(ready: int, *, cordoned: int = 0, not_ready: int = 0) -> list[NodeInfo]:
    manifests = [o.node(f"n{i}") for i in range(ready)]
    manifests += [o.node(f"c{i}", unschedulable=True) for i in range(cordoned)]
    manifests += [o.node(f"x{i}", ready=False) for i in range(not_ready)]
    return [NodeInfo.from_manifest(m) for m in manifests]


def _pods() -> dict[str, PodInfo]:
    web = o.deployment("shop", "web", replicas=1, nodes=["n0"])[2]
    proxy = o.daemonset("kube-system", "kube-proxy", nodes=["n0"])[1]
    mirror = o.pod(
        "etcd-n0",
        "kube-system",
        node_name="n0",
        labels={},
        spec={"containers": []},
        annotations={"kubernetes.io/config.mirror": "abc"},
    )
    bare = o.pod("debug", "shop", node_name="n0", labels={}, spec={"containers": []})
    cache = o.deployment("shop", "cache", replicas=1, nodes=["n0"])[2]
    cache["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    done = o.deployment("batch", "report", replicas=1, nodes=["n0"])[2]
    done["status"]["phase"] = "Succeeded"
    leaving = o.deployment("shop", "old", replicas=1, nodes=["n0"])[2]
    leaving["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    manifests = {
        "web": web,
        "proxy": proxy,
        "mirror": mirror,
        "bare": bare,
        "cache": cache,
        "done": done,
        "leaving": leaving,
    }
    return {key: PodInfo.from_manifest(m) for key, m in manifests.items()}


def test_pod_rules_follow_kubectl_drain() -> None:
    pods = _pods()
    plans = {
        p.pod.name: p
        for p in plan_pods(list(pods.values()), delete_emptydir_data=False, force=False)
    }
    assert plans[pods["web"].name].action == "evict"
    assert "ReplicaSet/web-" in plans[pods["web"].name].reason
    assert plans[pods["proxy"].name].action == "skip"
    assert "DaemonSet-managed" in plans[pods["proxy"].name].reason
    assert plans["etcd-n0"].action == "skip" and "mirror" in plans["etcd-n0"].reason
    assert plans["debug"].action == "refuse" and "force=true" in plans["debug"].reason
    assert plans[pods["cache"].name].action == "refuse"
    assert "emptyDir (scratch)" in plans[pods["cache"].name].reason
    assert plans[pods["done"].name].action == "evict"
    assert plans[pods["done"].name].reason == "finished (Succeeded)"
    assert plans[pods["leaving"].name].action == "skip"


def test_flags_turn_refusals_into_evictions() -> None:
    pods = _pods()
    plans = {
        p.pod.name: p for p in plan_pods(list(pods.values()), delete_emptydir_data=True, force=True)
    }
    assert plans["debug"].action == "evict" and "not be recreated" in plans["debug"].reason
    assert plans[pods["cache"].name].action == "evict"
    assert "emptyDir data will be lost" in plans[pods["cache"].name].reason
    refusals(list(plans.values()))  # nothing left to refuse


def test_refusals_list_every_blocking_pod() -> None:
    plans = plan_pods(list(_pods().values()), delete_emptydir_data=False, force=False)
    with pytest.raises(PreflightFailed, match=r"2 pod\(s\) cannot be drained: .*shop/debug"):
        refusals(plans)


def test_protected_namespaces_refuse_only_evictions() -> None:
    plans = plan_pods(list(_pods().values()), delete_emptydir_data=True, force=True)
    check_protected(plans, ["kube-system"])  # kube-proxy and the mirror pod are skipped anyway
    with pytest.raises(PreflightFailed, match=r"node\(s\) n0 run pods of protected namespaces"):
        check_protected(plans, ["batch"])


def test_choose_nodes_takes_ready_schedulable_ones() -> None:
    nodes = _nodes(5, cordoned=1, not_ready=1)
    first = choose_nodes(nodes, count=2, percent=0, pick="first")
    assert [n.name for n in first] == ["n0", "n1"]
    # percent of the 6 Ready nodes (the cordoned one is Ready), rounded down
    assert len(choose_nodes(nodes, count=0, percent=34, pick="first")) == 2
    assert len(choose_nodes(nodes, count=0, percent=1, pick="first")) == 1
    picked = {n.name for n in choose_nodes(nodes, count=2, percent=0, pick="random", seed=3)}
    assert picked == {
        n.name for n in choose_nodes(nodes, count=2, percent=0, pick="random", seed=3)
    }
    assert picked <= {f"n{i}" for i in range(5)}


@pytest.mark.parametrize(
    ("ready", "cordoned", "drain", "fraction", "allowed"),
    [
        (3, 0, 1, 1 / 3, True),
        (3, 0, 2, 1 / 3, False),
        (2, 0, 1, 1 / 3, False),  # floor(2/3) = 0
        (2, 0, 1, 0.5, True),
        (6, 1, 1, 1 / 3, True),
        (6, 1, 2, 1 / 3, False),  # 1 cordoned + 2 > floor(6/3)
        (6, 2, 1, 1 / 3, False),  # already cordoned nodes count
        (3, 0, 3, 1.0, False),  # never all
        (4, 1, 3, 1.0, False),  # never all, counting the cordoned one
    ],
)
def test_blast_radius(
    ready: int, cordoned: int, drain: int, fraction: float, allowed: bool
) -> None:
    nodes = _nodes(ready - cordoned, cordoned=cordoned, not_ready=2)
    chosen = choose_nodes(nodes, count=drain, percent=0, pick="first")
    check = lambda: check_blast_radius(  # noqa: E731
        nodes, chosen, max_fraction=fraction, selector="role=w", wanted=drain
    )
    if allowed:
        check()
    else:
        with pytest.raises(PreflightFailed, match=r"refusing to drain .*Nothing was changed"):
            check()


def test_blast_radius_refuses_when_too_few_candidates() -> None:
    nodes = _nodes(1, cordoned=2)
    chosen = choose_nodes(nodes, count=2, percent=0, pick="first")
    with pytest.raises(PreflightFailed, match=r"2 node\(s\) wanted but only 1"):
        check_blast_radius(nodes, chosen, max_fraction=1, selector="role=w", wanted=2)


def test_backoff_grows_and_is_capped() -> None:
    delays = backoff_delays(0.5, 4.0, jitter=0.2, rng=random.Random(1))
    taken = [next(delays) for _ in range(8)]
    for expected, got in zip([0.5, 1, 2, 4, 4, 4, 4, 4], taken, strict=True):
        assert expected * 0.8 <= got <= expected * 1.2


def test_interleave_spreads_evictions_across_controllers() -> None:
    objs = o.deployment("a", "web", replicas=3, nodes=["n0"])[2:]
    objs += o.deployment("a", "api", replicas=2, nodes=["n0"])[2:]
    objs.append(o.pod("solo", "a", node_name="n0", labels={}, spec={"containers": []}))
    pods = [PodInfo.from_manifest(m) for m in objs]
    order = [p.name.split("-")[0] for p in interleave(pods)]
    assert order == ["web", "api", "solo", "web", "api", "web"]
