"""Workload controllers of the API emulator: rollouts and status counts.

A change of a workload's ``spec.template`` bumps ``metadata.generation`` at
once; ``rollout_delay`` seconds later the pods are replaced by pods of the new
template (through the cluster's ``injector``) and the status reports the
rollout complete, the way ``kubectl rollout status`` judges it
(``observedGeneration``, ``updatedReplicas``, ``availableReplicas``...).
"""

from __future__ import annotations

import copy
from typing import Any

from support import k8s_objects as objs
from support.k8s_cluster import KINDS, PODS, ClusterState, FollowUp, Res, is_ready

__all__ = ["complete_rollout", "refresh_workload_status", "start_rollout"]

Obj = dict[str, Any]
RS = KINDS["ReplicaSet"]


def _owned_by(state: ClusterState, r: Res, ns: str, uid: str) -> list[Obj]:
    return [
        o
        for o in state.items(r, ns)
        if any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or [])
    ]


def _pods_of(state: ClusterState, workload: Obj) -> list[Obj]:
    ns, uid = workload["metadata"]["namespace"], workload["metadata"]["uid"]
    if workload["kind"] != "Deployment":
        return _owned_by(state, PODS, ns, uid)
    pods: list[Obj] = []
    for rs in _owned_by(state, RS, ns, uid):
        pods += _owned_by(state, PODS, ns, rs["metadata"]["uid"])
    return pods


def _revision(workload: Obj) -> str:
    digest = objs.template_hash(workload["spec"]["template"])
    if workload["kind"] == "StatefulSet":
        return f"{workload['metadata']['name']}-{digest}"
    return digest if workload["kind"] == "Deployment" else digest[:10]


def _is_updated(workload: Obj, pod: Obj, revision: str) -> bool:
    labels = pod["metadata"].get("labels") or {}
    key = "pod-template-hash" if workload["kind"] == "Deployment" else "controller-revision-hash"
    return labels.get(key) == revision


def refresh_workload_status(state: ClusterState, workload: Obj) -> None:
    """Recompute the replica counts of a workload from its pods (only writes on change)."""
    pods = _pods_of(state, workload)
    revision = _revision(workload)
    ready = sum(1 for p in pods if is_ready(p))
    updated = sum(1 for p in pods if _is_updated(workload, p, revision))
    status = dict(workload.get("status") or {})
    if workload["kind"] == "DaemonSet":
        status.update(
            currentNumberScheduled=len(pods),
            numberReady=ready,
            numberAvailable=ready,
            updatedNumberScheduled=updated,
        )
    else:
        status.update(
            replicas=len(pods),
            readyReplicas=ready,
            availableReplicas=ready,
            updatedReplicas=updated,
        )
    if status != workload.get("status"):
        fresh = copy.deepcopy(workload)
        fresh["status"] = status
        state.put(fresh)


def start_rollout(state: ClusterState, workload: Obj) -> list[FollowUp]:
    """The template changed: bump the generation, finish the rollout later."""
    meta = workload["metadata"]
    r = KINDS[workload["kind"]]
    fresh = state.get(r, meta["namespace"], meta["name"])
    if fresh is None:
        return []
    generation = int(fresh["metadata"].get("generation", 1)) + 1
    fresh["metadata"]["generation"] = generation
    state.put(fresh)
    key = f"{workload['kind']}/{meta['namespace']}/{meta['name']}"
    state.in_rollout.add(key)
    state.max_parallel_rollouts = max(state.max_parallel_rollouts, len(state.in_rollout))
    state.note("rollout-start", key)
    ns, name = meta["namespace"], meta["name"]
    return [(state.rollout_delay, lambda: complete_rollout(state, r, ns, name, generation))]


def _new_pod(state: ClusterState, owner: Obj, name: str, node: str | None, labels: Obj) -> None:
    pod = objs.pod_from_template(owner, name, node_name=node, ready=True, extra_labels=labels)
    if state.injector is not None:
        pod = state.injector(pod, state)
    state.put(pod)


def _roll_deployment(state: ClusterState, dep: Obj) -> None:
    ns, name, uid = dep["metadata"]["namespace"], dep["metadata"]["name"], dep["metadata"]["uid"]
    digest = objs.template_hash(dep["spec"]["template"])
    rs_name = f"{name}-{digest}"
    for old in _owned_by(state, RS, ns, uid):
        for pod in _owned_by(state, PODS, ns, old["metadata"]["uid"]):
            state.remove(PODS, ns, pod["metadata"]["name"])
        if old["metadata"]["name"] != rs_name:
            old["spec"]["replicas"] = 0
            old["status"] = {"replicas": 0, "observedGeneration": 1}
            state.put(old)
    rs = copy.deepcopy(dep)
    rs.update(kind="ReplicaSet", status={"observedGeneration": 1})
    rs["metadata"] = {
        "name": rs_name,
        "namespace": ns,
        "generation": 1,
        "labels": {
            **dep["spec"]["template"]["metadata"].get("labels", {}),
            "pod-template-hash": digest,
        },
        "ownerReferences": [objs.owner_ref(dep)],
    }
    rs["spec"]["template"]["metadata"].setdefault("labels", {})["pod-template-hash"] = digest
    state.put(rs)
    for _ in range(int(dep["spec"].get("replicas", 1))):
        _new_pod(state, rs, f"{rs_name}-{state._suffix()}", state.schedule(dep), {})


def _roll_pods_in_place(state: ClusterState, workload: Obj) -> None:
    ns, name = workload["metadata"]["namespace"], workload["metadata"]["name"]
    revision = _revision(workload)
    labels = {"controller-revision-hash": revision}
    if workload["kind"] == "StatefulSet":
        for i in range(int(workload["spec"].get("replicas", 1))):
            state.remove(PODS, ns, f"{name}-{i}")
            _new_pod(state, workload, f"{name}-{i}", state.schedule(workload), labels)
        return
    for pod in _pods_of(state, workload):
        state.remove(PODS, ns, pod["metadata"]["name"])
        _new_pod(state, workload, f"{name}-{state._suffix()}", pod["spec"].get("nodeName"), labels)


def complete_rollout(
    state: ClusterState, r: Res, ns: str, name: str, generation: int
) -> list[FollowUp]:
    """Replace the pods with the new template's and report the rollout complete."""
    key_kind = next(kind for kind, value in KINDS.items() if value == r)
    key = f"{key_kind}/{ns}/{name}"
    workload = state.get(r, ns, name)
    if workload is None or int(workload["metadata"].get("generation", 1)) != generation:
        if workload is None:
            state.in_rollout.discard(key)
        return []  # a newer change is rolling out; it will finish the job
    if workload["kind"] == "Deployment":
        _roll_deployment(state, workload)
    else:
        _roll_pods_in_place(state, workload)
    workload = state.get(r, ns, name) or workload
    workload.setdefault("status", {})["observedGeneration"] = generation
    if workload["kind"] == "StatefulSet":
        revision = _revision(workload)
        workload["status"].update(currentRevision=revision, updateRevision=revision)
    state.put(workload)
    refresh_workload_status(state, state.get(r, ns, name) or workload)
    for pod in _pods_of(state, workload)[:1]:
        state.refresh_budgets(pod)
    state.in_rollout.discard(key)
    state.note("rollout-done", key)
    return []
