"""Node, pending-pod, Deployment and HPA probes against the emulator."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client
from support import k8s_objects as o
from support.k8s_emulator import EmulatorHandle

from chaos_ext._core.k8s import api_client
from chaos_ext.errors import KubernetesError
from chaos_ext.node._status import hpa_summary
from chaos_ext.node.actions import drain_nodes
from chaos_ext.node.probes import deployment_ready_ratio, hpa_replicas, nodes_ready, pods_pending


def _later(seconds: float, action: object) -> threading.Timer:
    timer = threading.Timer(seconds, action)  # type: ignore[arg-type]
    timer.start()
    return timer


def test_nodes_ready_counts_by_selector_and_waits(
    emulator: EmulatorHandle, pool: list[str]
) -> None:
    emulator.put(o.node("worker-7", {"role": "eat-workers"}, ready=False))
    summary = nodes_ready("role=eat-workers")
    assert summary["total"] == 4 and summary["ready"] == 3
    assert summary["not_ready"] == ["worker-7"] and summary["all_ready"] is False
    assert nodes_ready("role=system")["all_ready_and_schedulable"] is True

    drain_nodes("role=eat-workers", count=1, pick="first")
    assert nodes_ready("role=system,kubernetes.io/os=linux")["total"] == 1
    cordoned = nodes_ready("role in (eat-workers)")
    assert cordoned["cordoned"] == ["worker-0"]
    # uncordon from another thread while the probe waits
    _later(0.4, lambda: emulator.put(o.node("worker-0", {"role": "eat-workers"})))
    _later(0.4, lambda: emulator.put(o.node("worker-7", {"role": "eat-workers"})))
    t0 = time.monotonic()
    waited = nodes_ready("role=eat-workers", wait_seconds=10)
    assert waited["all_ready_and_schedulable"] is True
    assert 0.3 < time.monotonic() - t0 < 5


def test_pods_pending_reports_unschedulable(emulator: EmulatorHandle, pool: list[str]) -> None:
    stuck = o.pod(
        "web-x",
        "shop",
        node_name=None,
        labels={"app": "web"},
        spec={"containers": [{"name": "web", "image": "web:1"}]},
    )
    starting = o.deployment("shop", "api", replicas=1, nodes=["worker-1"])
    starting[2]["status"] = o.pod_status(
        starting[2]["spec"], scheduled=True, ready=False, start=o.rfc3339()
    )
    emulator.put(stuck, starting, o.deployment("shop", "web", replicas=2, nodes=pool))
    report = pods_pending()
    assert report["pending"] == 2 and report["unschedulable"] == 1
    (unschedulable,) = [p for p in report["pods"] if p["unschedulable"]]
    assert unschedulable["name"] == "web-x" and "unschedulable" in unschedulable["message"]
    assert pods_pending(namespace="other")["pending"] == 0
    assert pods_pending(namespace="shop", label_selector="app=web")["pending"] == 1
    assert pods_pending(min_age_seconds=3600)["pending"] == 0


def test_deployment_ready_ratio_waits_for_replacements(
    emulator: EmulatorHandle, pool: list[str]
) -> None:
    emulator.put(o.deployment("shop", "web", replicas=4, nodes=pool))
    assert deployment_ready_ratio("web", "shop") == 1.0
    core = client.CoreV1Api(api_client())
    victim = emulator.items("Pod", "shop")[0]["metadata"]["name"]
    core.delete_namespaced_pod(victim, "shop", _request_timeout=5)
    assert deployment_ready_ratio("web", "shop") == 0.75  # replacement not Ready yet
    assert deployment_ready_ratio("web", "shop", wait_seconds=10) == 1.0
    with pytest.raises(KubernetesError, match="read deployment shop/nope: HTTP 404"):
        deployment_ready_ratio("nope", "shop")


def test_hpa_replicas_tells_stuck_from_converging(emulator: EmulatorHandle) -> None:
    emulator.put(
        o.hpa("shop", "web", target="web", min_replicas=2, max_replicas=10, current=4, desired=6)
    )
    emulator.put(
        o.hpa(
            "shop",
            "blind",
            target="blind",
            min_replicas=2,
            max_replicas=10,
            current=4,
            desired=4,
            scaling_active=False,
        )
    )
    web = hpa_replicas("web", "shop")
    assert (web["current"], web["desired"], web["converged"], web["stuck"]) == (4, 6, False, False)
    blind = hpa_replicas("blind", "shop")
    assert blind["stuck"] is True and "ScalingActive=False" in blind["why"][0]
    _later(
        0.3,
        lambda: emulator.put(
            o.hpa(
                "shop", "web", target="web", min_replicas=2, max_replicas=10, current=6, desired=6
            )
        ),
    )
    assert hpa_replicas("web", "shop", wait_seconds=10)["converged"] is True


def test_hpa_summary_at_max() -> None:
    summary = hpa_summary(
        o.hpa("a", "b", target="b", min_replicas=1, max_replicas=5, current=5, desired=5)
    )
    assert summary["at_max"] is True and summary["stuck"] is False
