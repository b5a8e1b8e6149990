"""sidecar_drift and rollout_drifted_workloads against the emulator with an Istio injector."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support.k8s_emulator import EmulatorHandle

from chaos_ext.sidecar.actions import change_sidecar_template, rollout_drifted_workloads
from chaos_ext.sidecar.errors import SidecarError
from chaos_ext.sidecar.probes import sidecar_drift

PREFIX = "gameday.example.com/sidecar"
MESH = ["shop", "payments"]


def _bump(tag: str = "1.23.1") -> None:
    change_sidecar_template(values_patch={"global": {"tag": tag}})


def _generations(emulator: EmulatorHandle) -> dict[str, int]:
    return {
        f"{kind}/{w['metadata']['namespace']}/{w['metadata']['name']}": w["metadata"]["generation"]
        for kind in ("Deployment", "StatefulSet", "DaemonSet")
        for w in emulator.items(kind)
    }


def test_drift_appears_after_a_template_change(
    emulator: EmulatorHandle, mesh: dict[str, Any]
) -> None:
    clean = sidecar_drift()
    assert (clean["pods"], clean["pods_without_sidecar"], clean["drifted_pods"]) == (10, 2, 0)
    _bump()
    drift = sidecar_drift(exclude_namespaces=["logging"])
    assert (drift["pods"], drift["drifted_pods"], drift["drifted_workloads"]) == (7, 7, 3)
    web = drift["drifted"][0]
    assert (web["kind"], web["namespace"], web["name"], web["drifted"]) == (
        "Deployment",
        "shop",
        "web",
        3,
    )
    assert (
        "docker.io/istio/proxyv2:1.22.3 != docker.io/istio/proxyv2:1.23.1" in web["differences"][0]
    )
    assert sidecar_drift(include_namespaces=["payments"])["drifted_pods"] == 2


def test_dry_run_lists_and_changes_nothing(emulator: EmulatorHandle, mesh: dict[str, Any]) -> None:
    _bump()
    before = _generations(emulator)
    result = rollout_drifted_workloads(dry_run=True, annotation_prefix=PREFIX)
    assert result["dry_run"] is True and result["restarted"] == []
    assert [(w["kind"], w["name"]) for w in result["selected"]] == [
        ("Deployment", "web"),
        ("Deployment", "api"),
        ("Deployment", "cart"),
    ]
    assert result["skipped"][0]["reason"] == "DaemonSet (pass include_daemonsets=true)"
    assert _generations(emulator) == before
    assert emulator.events("rollout-start") == []
    assert sidecar_drift()["drifted_pods"] == 10


def test_rollout_annotates_why_and_leaves_no_drift(
    emulator: EmulatorHandle, mesh: dict[str, Any]
) -> None:
    _bump()
    t0 = datetime.now(UTC).replace(microsecond=0)
    result = rollout_drifted_workloads(
        annotation_prefix=PREFIX,
        reason="istio 1.23 upgrade",
        include_daemonsets=True,
        timeout_seconds=30,
    )
    assert len(result["restarted"]) == 4 and all(r["complete"] for r in result["restarted"])
    for kind, ns, name in [("Deployment", "shop", "web"), ("DaemonSet", "logging", "fluentbit")]:
        workload = emulator.get(kind, ns, name)
        assert workload is not None
        notes = workload["spec"]["template"]["metadata"]["annotations"]
        stamp = datetime.fromisoformat(notes[f"{PREFIX}.rollout.timestamp"].replace("Z", "+00:00"))
        assert t0 - timedelta(seconds=1) <= stamp <= datetime.now(UTC)
        assert notes[f"{PREFIX}.rollout.reason"].startswith("istio 1.23 upgrade: image: docker.io")
    # the new pods carry the annotations too (someone debugging a pod sees why it restarted)
    web_pods = [p for p in emulator.items("Pod", "shop") if p["metadata"]["labels"]["app"] == "web"]
    assert len(web_pods) == 3
    assert all(f"{PREFIX}.rollout.reason" in p["metadata"]["annotations"] for p in web_pods)
    assert sidecar_drift()["drifted_pods"] == 0


@pytest.mark.parametrize("parallel", [1, 3])
def test_parallel_rollouts(emulator: EmulatorHandle, mesh: dict[str, Any], parallel: int) -> None:
    emulator.call(lambda c: setattr(c, "rollout_delay", 0.4))
    _bump()
    t0 = time.monotonic()
    result = rollout_drifted_workloads(
        parallel=parallel, annotation_prefix=PREFIX, timeout_seconds=30
    )
    took = time.monotonic() - t0
    assert len(result["restarted"]) == 3
    assert emulator.call(lambda c: c.max_parallel_rollouts) == parallel
    assert took >= 0.4 * (3 / parallel) * 0.9


def test_started_before_and_namespaces(emulator: EmulatorHandle, mesh: dict[str, Any]) -> None:
    _bump()
    past = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    none = rollout_drifted_workloads(started_before=past, annotation_prefix=PREFIX)
    assert none["selected"] == [] and none["restarted"] == []
    result = rollout_drifted_workloads(include_namespaces=["payments"], annotation_prefix=PREFIX)
    assert [r["name"] for r in result["restarted"]] == ["api"]
    assert sidecar_drift(include_namespaces=["payments"])["drifted_pods"] == 0
    assert sidecar_drift(include_namespaces=["shop"])["drifted_pods"] == 5


def test_a_rollout_that_does_not_finish_fails_the_action(
    emulator: EmulatorHandle, mesh: dict[str, Any]
) -> None:
    emulator.call(lambda c: setattr(c, "rollout_delay", 30))
    _bump()
    with pytest.raises(SidecarError, match=r"3 rollout\(s\) not complete within 1 s"):
        rollout_drifted_workloads(timeout_seconds=1, parallel=3, annotation_prefix=PREFIX)
