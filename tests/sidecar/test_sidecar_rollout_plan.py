"""Rollout selection, annotation keys, completion checks and the shared drift query (pure)."""

from __future__ import annotations

import inspect

import pytest

from chaos_ext._core.validation import check_activity_arguments
from chaos_ext.errors import InvalidArgument
from chaos_ext.sidecar._drift import WorkloadDrift
from chaos_ext.sidecar._observe import QUERY_ARGUMENTS
from chaos_ext.sidecar._rollout import (
    annotation_keys,
    restart_patch,
    rollout_status,
    select_workloads,
)
from chaos_ext.sidecar.actions import rollout_drifted_workloads
from chaos_ext.sidecar.probes import sidecar_drift


def test_annotation_keys() -> None:
    assert annotation_keys("gameday.example.com/sidecar") == (
        "gameday.example.com/sidecar.rollout.timestamp",
        "gameday.example.com/sidecar.rollout.reason",
    )
    assert annotation_keys("chaos")[1] == "chaos.rollout.reason"
    for bad in ("Bad_DNS/x", "x" * 60, "a/b/c", "with space", "-lead"):
        with pytest.raises(InvalidArgument, match="not a valid annotation key"):
            annotation_keys(bad)


def _w(kind: str, ns: str, name: str, drifted: int, old: int = 0) -> WorkloadDrift:
    return WorkloadDrift(
        kind, ns, name, pods=drifted + 1, drifted=drifted, drifted_started_before=old
    )


def test_selection_filters_and_orders() -> None:
    drift = [
        _w("Deployment", "shop", "web", 3, old=3),
        _w("Deployment", "shop", "cart", 5, old=0),
        _w("StatefulSet", "data", "kafka", 2, old=2),
        _w("DaemonSet", "logging", "fluentbit", 4),
        _w("Pod", "shop", "debug", 1),
        _w("Deployment", "istio-system", "gw", 2),
        _w("Deployment", "shop", "clean", 0),
    ]
    chosen, skipped = select_workloads(
        drift,
        include_namespaces=[],
        exclude_namespaces=["istio-system"],
        include_daemonsets=False,
        only_started_before=False,
    )
    assert [w.name for w in chosen] == ["cart", "web", "kafka"]
    reasons = {s["name"]: s["reason"] for s in skipped}
    assert reasons == {
        "fluentbit": "DaemonSet (pass include_daemonsets=true)",
        "debug": "a Pod cannot be rolled out (restart its pods yourself)",
        "gw": "namespace excluded",
    }
    chosen, _ = select_workloads(
        drift,
        include_namespaces=["shop", "logging"],
        exclude_namespaces=[],
        include_daemonsets=True,
        only_started_before=False,
    )
    assert [w.name for w in chosen] == ["cart", "fluentbit", "web"]
    chosen, _ = select_workloads(
        drift,
        include_namespaces=[],
        exclude_namespaces=[],
        include_daemonsets=False,
        only_started_before=True,
    )
    assert [w.name for w in chosen] == ["web", "kafka"]  # cart's drifted pods are all recent


def test_restart_patch_touches_only_pod_template_annotations() -> None:
    patch = restart_patch(("p.rollout.timestamp", "p.rollout.reason"), timestamp="T", reason="R")
    assert patch == {
        "spec": {
            "template": {
                "metadata": {"annotations": {"p.rollout.timestamp": "T", "p.rollout.reason": "R"}}
            }
        }
    }


@pytest.mark.parametrize(
    ("obj", "done"),
    [
        (
            {
                "kind": "Deployment",
                "metadata": {"generation": 3},
                "spec": {"replicas": 2},
                "status": {
                    "observedGeneration": 2,
                    "updatedReplicas": 2,
                    "replicas": 2,
                    "availableReplicas": 2,
                },
            },
            False,
        ),
        (
            {
                "kind": "Deployment",
                "metadata": {"generation": 3},
                "spec": {"replicas": 2},
                "status": {
                    "observedGeneration": 3,
                    "updatedReplicas": 2,
                    "replicas": 3,
                    "availableReplicas": 2,
                },
            },
            False,
        ),
        (
            {
                "kind": "Deployment",
                "metadata": {"generation": 3},
                "spec": {"replicas": 2},
                "status": {
                    "observedGeneration": 3,
                    "updatedReplicas": 2,
                    "replicas": 2,
                    "availableReplicas": 2,
                },
            },
            True,
        ),
        (
            {
                "kind": "StatefulSet",
                "metadata": {"generation": 2},
                "spec": {"replicas": 2},
                "status": {
                    "observedGeneration": 2,
                    "updatedReplicas": 2,
                    "readyReplicas": 2,
                    "currentRevision": "a",
                    "updateRevision": "b",
                },
            },
            False,
        ),
        (
            {
                "kind": "StatefulSet",
                "metadata": {"generation": 2},
                "spec": {"replicas": 2},
                "status": {
                    "observedGeneration": 2,
                    "updatedReplicas": 2,
                    "readyReplicas": 2,
                    "currentRevision": "b",
                    "updateRevision": "b",
                },
            },
            True,
        ),
        (
            {
                "kind": "DaemonSet",
                "metadata": {"generation": 2},
                "status": {
                    "observedGeneration": 2,
                    "desiredNumberScheduled": 3,
                    "updatedNumberScheduled": 2,
                    "numberAvailable": 3,
                },
            },
            False,
        ),
        (
            {
                "kind": "DaemonSet",
                "metadata": {"generation": 2},
                "status": {
                    "observedGeneration": 2,
                    "desiredNumberScheduled": 3,
                    "updatedNumberScheduled": 3,
                    "numberAvailable": 3,
                },
            },
            True,
        ),
    ],
)
def test_rollout_status(obj: dict[str, object], done: bool) -> None:
    assert rollout_status(obj)[0] is done


def test_one_drift_query_for_the_probe_and_the_rollout() -> None:
    """Same arguments, names, defaults and types, first in both signatures; one check reads them."""
    probe = inspect.signature(sidecar_drift).parameters
    action = inspect.signature(rollout_drifted_workloads).parameters
    count = len(QUERY_ARGUMENTS)
    assert tuple(probe)[:count] == tuple(action)[:count] == QUERY_ARGUMENTS
    for name in QUERY_ARGUMENTS:
        assert (probe[name].default, probe[name].annotation) == (
            action[name].default,
            action[name].annotation,
        ), name
    bad = {"started_before": "yesterday"}
    for activity in (sidecar_drift, rollout_drifted_workloads):
        with pytest.raises(InvalidArgument, match="started_before: 'yesterday'"):
            check_activity_arguments(activity, bad)
