"""The emulator's Job controller and garbage collection, as far as load Jobs need them.

* A created Job with ``completionMode: Indexed`` gets ``parallelism`` pods, one
  per completion index: labels ``job-name``, ``controller-uid`` and
  ``batch.kubernetes.io/job-completion-index``, the annotation of the same
  name, ``JOB_COMPLETION_INDEX`` injected from it (as the real controller
  does), an ownerReference to the Job, scheduled like the other controllers'
  pods and Running after ``ready_delay``.
* ``DELETE`` of a Job honours the body's ``propagationPolicy``: ``Foreground``
  and ``Background`` delete the Job's pods (foreground first, then the Job),
  ``Orphan`` leaves them. Every deletion is noted as an event
  ``("job-delete", "<ns>/<name> <policy>")`` so tests can check the policy.
"""

from __future__ import annotations

import copy
from typing import Any

from support import k8s_objects as objs
from support.k8s_cluster import KINDS, PODS, ClusterState, FollowUp

__all__ = ["JOBS", "job_created", "job_deleted"]

Obj = dict[str, Any]
JOBS = KINDS["Job"]
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def _index_env() -> Obj:
    path = f"metadata.annotations['{INDEX_KEY}']"
    return {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": path}}}


def job_created(cluster: ClusterState, job: Obj) -> list[FollowUp]:
    """Start the Job's pods (an Indexed Job: one per index up to ``parallelism``)."""
    meta, spec = job["metadata"], job["spec"]
    stored = cluster.get(JOBS, meta["namespace"], meta["name"]) or job
    follow: list[FollowUp] = []
    count = int(spec.get("parallelism", 1))
    for index in range(min(count, int(spec.get("completions", count)))):
        name = f"{meta['name']}-{index}-{cluster._suffix()}"
        labels = {
            **(spec["template"].get("metadata", {}).get("labels") or {}),
            "job-name": meta["name"],
            "controller-uid": stored["metadata"]["uid"],
            INDEX_KEY: str(index),
        }
        pod_spec = copy.deepcopy(spec["template"]["spec"])
        for container in pod_spec.get("containers", []):
            container["env"] = [*container.get("env", []), _index_env()]
        pod = objs.pod(
            name,
            meta["namespace"],
            node_name=cluster.schedule(stored),
            labels=labels,
            spec=pod_spec,
            owner=stored,
            ready=False,
            annotations={INDEX_KEY: str(index)},
        )
        follow += cluster._start_pod(pod)
    cluster.note("job-created", f"{meta['namespace']}/{meta['name']}")
    return follow


def job_deleted(cluster: ClusterState, job: Obj, policy: str) -> None:
    """Garbage-collect the Job's pods as ``policy`` says (before the Job goes)."""
    meta = job["metadata"]
    cluster.note("job-delete", f"{meta['namespace']}/{meta['name']} {policy}")
    if policy == "Orphan":
        return
    for pod in cluster.items(PODS, meta["namespace"]):
        owners = pod["metadata"].get("ownerReferences") or []
        if any(o.get("uid") == meta.get("uid") for o in owners):
            cluster.remove(PODS, meta["namespace"], pod["metadata"]["name"])
