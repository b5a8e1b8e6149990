"""Builders for Kubernetes objects shaped like a real API server returns them.

Nodes, Deployments (with their ReplicaSet and pods, named and labelled the way
the controllers do it: ``<deploy>-<pod-template-hash>-<5 chars>``),
StatefulSets, DaemonSets, PodDisruptionBudgets, HPAs and ConfigMaps. Used to
seed the API emulator and by the emulator's own controllers when they create
replacement pods.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import uuid
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "configmap",
    "daemonset",
    "deployment",
    "hpa",
    "namespace",
    "node",
    "owner_ref",
    "pdb",
    "pod",
    "pod_from_template",
    "pod_status",
    "rfc3339",
    "statefulset",
    "template_hash",
]

Obj = dict[str, Any]
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand alphabet


def rfc3339(when: datetime | None = None) -> str:
    return (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(_SAFE) for _ in range(n))


def template_hash(template: Obj) -> str:
    """A stable pod-template-hash for a pod template (10 chars, controller alphabet)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(_SAFE[b % len(_SAFE)] for b in digest[:10])


def _meta(name: str, ns: str | None = None, **extra: Any) -> Obj:
    meta: Obj = {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": rfc3339()}
    if ns is not None:
        meta["namespace"] = ns
    meta.update({k: v for k, v in extra.items() if v is not None})
    return meta


def owner_ref(obj: Obj) -> Obj:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": _meta(name, labels=labels or {"kubernetes.io/metadata.name": name}),
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def node(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    ready: bool = True,
    unschedulable: bool = False,
) -> Obj:
    base = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "m5.xlarge",
        "topology.kubernetes.io/zone": "eu-west-1a",
    }
    spec: Obj = {"providerID": f"aws:///eu-west-1a/i-{uuid.uuid4().hex[:17]}"}
    if unschedulable:
        spec["unschedulable"] = True
    now = rfc3339()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(name, labels={**base, **(labels or {})}),
        "spec": spec,
        "status": {
            "conditions": [
                {
                    "type": "MemoryPressure",
                    "status": "False",
                    "reason": "KubeletHasSufficientMemory",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": "Ready",
                    "status": "True" if ready else "Unknown",
                    "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                },
            ],
            "allocatable": {"cpu": "3920m", "memory": "15009856Ki", "pods": "58"},
            "capacity": {"cpu": "4", "memory": "16106560Ki", "pods": "58"},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": str(uuid.uuid4()),
                "containerRuntimeVersion": "containerd://1.7.11",
                "kernelVersion": "5.10.205",
                "kubeProxyVersion": "v1.30.4-eks-a737599",
                "kubeletVersion": "v1.30.4-eks-a737599",
                "machineID": uuid.uuid4().hex,
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2",
                "systemUUID": str(uuid.uuid4()),
            },
        },
    }


def pod(
    name: str,
    ns: str,
    *,
    node_name: str | None,
    labels: dict[str, str],
    spec: Obj,
    owner: Obj | None = None,
    ready: bool = True,
    annotations: dict[str, str] | None = None,
    started: datetime | None = None,
) -> Obj:
    """A scheduled pod; ``ready=False`` is ContainerCreating, ``node_name=None`` is Pending."""
    spec = copy.deepcopy(spec)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    if node_name:
        spec["nodeName"] = node_name
    start = rfc3339(started)
    meta = _meta(name, ns, labels=dict(labels), annotations=annotations)
    meta["creationTimestamp"] = start
    if owner is not None:
        meta["ownerReferences"] = [owner_ref(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": pod_status(spec, scheduled=node_name is not None, ready=ready, start=start),
    }


def pod_status(spec: Obj, *, scheduled: bool, ready: bool, start: str) -> Obj:
    if not scheduled:
        return {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 node(s) were unschedulable.",
                    "lastTransitionTime": start,
                }
            ],
        }
    flag = "True" if ready else "False"
    return {
        "phase": "Running" if ready else "Pending",
        "hostIP": "10.0.1.17",
        "podIP": f"10.0.{random.randint(2, 250)}.{random.randint(2, 250)}",
        "startTime": start,
        "qosClass": "Burstable",
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": start},
            {"type": "Ready", "status": flag, "lastTransitionTime": start},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": start},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": start},
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "ready": ready,
                "imageID": f"{c.get('image', '')}@sha256:{'0' * 64}" if ready else "",
                "restartCount": 0,
                "started": ready,
                "state": {"running": {"startedAt": start}}
                if ready
                else {"waiting": {"reason": "ContainerCreating"}},
            }
            for c in spec.get("containers", [])
        ],
    }


def pod_from_template(
    owner: Obj,
    name: str,
    *,
    node_name: str | None,
    ready: bool = True,
    extra_labels: dict[str, str] | None = None,
    started: datetime | None = None,
) -> Obj:
    template = owner["spec"]["template"]
    meta = template.get("metadata") or {}
    return pod(
        name,
        owner["metadata"]["namespace"],
        node_name=node_name,
        labels={**(meta.get("labels") or {}), **(extra_labels or {})},
        annotations=dict(meta.get("annotations") or {}) or None,
        spec=template["spec"],
        owner=owner,
        ready=ready,
        started=started,
    )


def _template(app: str, containers: list[Obj] | None, labels: dict[str, str]) -> Obj:
    return {
        "metadata": {"labels": {"app": app, **labels}},
        "spec": {
            "containers": containers
            or [
                {
                    "name": app,
                    "image": f"registry.example.com/{app}:1.4.2",
                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }


def _workload(kind: str, ns: str, name: str, replicas: int | None, template: Obj) -> Obj:
    spec: Obj = {
        "selector": {"matchLabels": {"app": template["metadata"]["labels"]["app"]}},
        "template": template,
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": _meta(name, ns, generation=1),
        "spec": spec,
        "status": {"observedGeneration": 1},
    }


def deployment(
    ns: str,
    name: str,
    *,
    replicas: int,
    nodes: list[str],
    containers: list[Obj] | None = None,
    labels: dict[str, str] | None = None,
    seed: int = 0,
    started: datetime | None = None,
    annotations: dict[str, str] | None = None,
) -> list[Obj]:
    """A Deployment, its ReplicaSet and ``replicas`` Ready pods spread over ``nodes``."""
    rng = random.Random(f"{ns}/{name}/{seed}")
    template = _template(name, containers, labels or {})
    if annotations:
        template["metadata"]["annotations"] = dict(annotations)
    dep = _workload("Deployment", ns, name, replicas, template)
    hashed = template_hash(template)
    rs_template = copy.deepcopy(template)
    rs_template["metadata"]["labels"]["pod-template-hash"] = hashed
    rs = _workload("ReplicaSet", ns, f"{name}-{hashed}", replicas, rs_template)
    rs["metadata"]["labels"] = dict(rs_template["metadata"]["labels"])
    rs["metadata"]["ownerReferences"] = [owner_ref(dep)]
    rs["spec"]["selector"]["matchLabels"]["pod-template-hash"] = hashed
    pods = [
        pod_from_template(
            rs,
            f"{rs['metadata']['name']}-{_suffix(rng)}",
            node_name=nodes[i % len(nodes)],
            started=started,
        )
        for i in range(replicas)
    ]
    ready = len(pods)
    dep["status"].update(
        replicas=ready, readyReplicas=ready, availableReplicas=ready, updatedReplicas=ready
    )
    rs["status"].update(replicas=ready, readyReplicas=ready, availableReplicas=ready)
    return [dep, rs, *pods]


def statefulset(
    ns: str,
    name: str,
    *,
    replicas: int,
    nodes: list[str],
    containers: list[Obj] | None = None,
) -> list[Obj]:
    template = _template(name, containers, {})
    sts = _workload("StatefulSet", ns, name, replicas, template)
    sts["spec"]["serviceName"] = name
    revision = f"{name}-{template_hash(template)[:10]}"
    pods = [
        pod_from_template(
            sts,
            f"{name}-{i}",
            node_name=nodes[i % len(nodes)],
            extra_labels={
                "controller-revision-hash": revision,
                "statefulset.kubernetes.io/pod-name": f"{name}-{i}",
            },
        )
        for i in range(replicas)
    ]
    sts["status"].update(
        replicas=replicas,
        readyReplicas=replicas,
        availableReplicas=replicas,
        updatedReplicas=replicas,
        currentReplicas=replicas,
        currentRevision=revision,
        updateRevision=revision,
    )
    return [sts, *pods]


def daemonset(
    ns: str,
    name: str,
    *,
    nodes: list[str],
    containers: list[Obj] | None = None,
) -> list[Obj]:
    rng = random.Random(f"{ns}/{name}")
    template = _template(name, containers, {})
    ds = _workload("DaemonSet", ns, name, None, template)
    pods = [
        pod_from_template(
            ds,
            f"{name}-{_suffix(rng)}",
            node_name=n,
            extra_labels={"controller-revision-hash": template_hash(template)[:10]},
        )
        for n in nodes
    ]
    n = len(nodes)
    ds["status"].update(
        desiredNumberScheduled=n,
        currentNumberScheduled=n,
        numberReady=n,
        numberAvailable=n,
        updatedNumberScheduled=n,
    )
    return [ds, *pods]


def pdb(
    ns: str,
    name: str,
    *,
    match_labels: dict[str, str],
    max_unavailable: int | str | None = None,
    min_available: int | str | None = None,
) -> Obj:
    spec: Obj = {"selector": {"matchLabels": match_labels}}
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if min_available is not None:
        spec["minAvailable"] = min_available
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(name, ns, generation=1),
        "spec": spec,
        "status": {"observedGeneration": 1},
    }


def hpa(
    ns: str,
    name: str,
    *,
    target: str,
    min_replicas: int,
    max_replicas: int,
    current: int,
    desired: int,
    able_to_scale: bool = True,
    scaling_active: bool = True,
) -> Obj:
    now = rfc3339()

    def cond(kind: str, ok: bool, reason: str) -> Obj:
        return {
            "type": kind,
            "status": "True" if ok else "False",
            "reason": reason,
            "lastTransitionTime": now,
        }

    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(name, ns),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 60},
                    },
                }
            ],
        },
        "status": {
            "currentReplicas": current,
            "desiredReplicas": desired,
            "conditions": [
                cond(
                    "AbleToScale",
                    able_to_scale,
                    "ReadyForNewScale" if able_to_scale else "FailedGetScale",
                ),
                cond(
                    "ScalingActive",
                    scaling_active,
                    "ValidMetricFound" if scaling_active else "FailedGetResourceMetric",
                ),
                cond("ScalingLimited", False, "DesiredWithinRange"),
            ],
        },
    }


def configmap(ns: str, name: str, data: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, ns), "data": data}
