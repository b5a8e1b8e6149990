"""The behaviour behind the API emulator: evictions, budgets, controllers, rollouts.

:class:`ClusterState` works on kmock's in-memory object store. It is plain
synchronous code; the emulator calls it with its lock held and schedules the
follow-ups it returns (``(delay_s, callback)``) on its event loop, so that
replacement pods become Ready and rollouts finish *later*, as in a cluster.

What it emulates, and how closely:

* ``pods/eviction`` (policy/v1): 404 for a missing pod; terminal pods are
  deleted without a budget check; more than one matching PodDisruptionBudget
  is a 500; a budget with no disruption left is a 429 ``TooManyRequests`` with
  a ``DisruptionBudget`` cause (the real message texts).
* The disruption controller: ``disruptionsAllowed = currentHealthy -
  desiredHealthy`` from ``minAvailable``/``maxUnavailable`` (ints or
  percentages), written to the budget's status on every pod change.
* ReplicaSet / StatefulSet / DaemonSet controllers: a deleted pod is replaced
  (same name for a StatefulSet), scheduled on a Ready, schedulable node that
  fits its nodeSelector, and turns Ready after ``ready_delay`` seconds; with no
  node left it stays Pending ``Unschedulable`` until a node is uncordoned.
* Rollouts: a change of ``spec.template`` bumps ``metadata.generation``; after
  ``rollout_delay`` seconds the pods are replaced by pods of the new template
  (passed through ``injector``, e.g. a sidecar injector) and the status says
  the rollout is complete.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import kmock

from support import k8s_objects as objs
from support.k8s_authorizer import RuleAuthorizer
from support.k8s_selectors import matches_label_selector

__all__ = ["KINDS", "ClusterState", "FollowUp", "Res", "is_ready", "res"]

Obj = dict[str, Any]
Res = tuple[str, str, str]  # (group, version, plural)
FollowUp = tuple[float, Callable[[], list[Any]]]

KINDS: dict[str, Res] = {
    "Node": ("", "v1", "nodes"),
    "Pod": ("", "v1", "pods"),
    "Namespace": ("", "v1", "namespaces"),
    "ConfigMap": ("", "v1", "configmaps"),
    "Deployment": ("apps", "v1", "deployments"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "PodDisruptionBudget": ("policy", "v1", "poddisruptionbudgets"),
    "HorizontalPodAutoscaler": ("autoscaling", "v2", "horizontalpodautoscalers"),
    "NetworkPolicy": ("networking.k8s.io", "v1", "networkpolicies"),
    "Job": ("batch", "v1", "jobs"),
    "Secret": ("", "v1", "secrets"),
}
PODS, NODES, PDBS = KINDS["Pod"], KINDS["Node"], KINDS["PodDisruptionBudget"]
WORKLOADS = {KINDS["Deployment"], KINDS["StatefulSet"], KINDS["DaemonSet"]}


_RESOURCES: dict[Res, kmock.resource] = {}


def res(r: Res) -> kmock.resource:
    """kmock's resource key (built once: its constructor's protocol checks are slow)."""
    found = _RESOURCES.get(r)
    if found is None:
        found = _RESOURCES[r] = kmock.resource(*r)
    return found


def is_ready(pod: Obj) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _status(code: int, reason: str, message: str, **details: Any) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "reason": reason,
        "message": message,
        "code": code,
        "details": details,
    }


def _scaled(value: int | str, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)


class ClusterState:
    """Cluster behaviour over kmock's object store (call with the emulator's lock held)."""

    def __init__(
        self,
        objects: kmock.ObjectsArray,
        *,
        ready_delay: float = 0.2,
        rollout_delay: float = 0.2,
        injector: Callable[[Obj, ClusterState], Obj] | None = None,
    ) -> None:
        self.objects = objects
        self.ready_delay = ready_delay
        self.rollout_delay = rollout_delay
        self.injector = injector
        self.events: list[tuple[float, str, str]] = []
        self.api_calls: list[str] = []  # "verb group/resource namespace", for RBAC checks
        self.authorizer = RuleAuthorizer()  # answers access reviews (not in api_calls)
        self.in_rollout: set[str] = set()
        self.max_parallel_rollouts = 0
        self.pdb_min_healthy: dict[str, int] = {}
        self._rv = itertools.count(1000)
        self._rng = random.Random(11)

    # -- store ---------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        return next(self._rv)

    def items(self, r: Res, ns: str | None = None) -> list[Obj]:
        found = []
        for (key, key_ns, _), obj in self.objects.items():
            same = (key.group, key.version, key.plural) == r
            if same and (ns is None or key_ns == ns) and not obj.deleted:
                found.append(obj.raw)
        return found

    def get(self, r: Res, ns: str | None, name: str) -> Obj | None:
        key = (res(r), ns, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return copy.deepcopy(self.objects[key].raw)

    def put(self, obj: Obj) -> Obj:
        """Create or replace an object (new version in its history)."""
        r = KINDS[obj["kind"]]
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", objs.rfc3339())
        meta["resourceVersion"] = str(self.resource_version)
        key = (res(r), meta.get("namespace"), meta["name"])
        if key in self.objects:
            self.objects[key].history.append(obj)
        else:
            self.objects[key] = obj
        return obj

    def bump(self, r: Res, ns: str | None, obj: Obj) -> str:
        """Give the stored object (changed in place by kmock) a new resourceVersion."""
        version = str(self.resource_version)
        key = (res(r), ns, obj["metadata"]["name"])
        if key in self.objects and not self.objects[key].deleted:
            self.objects[key].last.raw["metadata"]["resourceVersion"] = version  # shared dict
        return version

    def remove(self, r: Res, ns: str | None, name: str) -> None:
        key = (res(r), ns, name)
        if key in self.objects and not self.objects[key].deleted:
            self.objects[key].delete()

    def note(self, what: str, target: str) -> None:
        self.events.append((time.monotonic(), what, target))

    # -- evictions and budgets -----------------------------------------------------------
    def budget(self, pdb: Obj) -> tuple[int, int, int, int]:
        """(disruptionsAllowed, currentHealthy, desiredHealthy, expectedPods) of a budget."""
        ns = pdb["metadata"]["namespace"]
        selector = pdb["spec"].get("selector")
        pods = [
            p
            for p in self.items(PODS, ns)
            if matches_label_selector(selector, p["metadata"].get("labels") or {})
            and not p["metadata"].get("deletionTimestamp")
        ]
        expected = len(pods)
        healthy = sum(1 for p in pods if is_ready(p))
        spec = pdb["spec"]
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected, round_up=True)
        elif spec.get("maxUnavailable") is not None:
            desired = expected - _scaled(spec["maxUnavailable"], expected, round_up=True)
        else:
            desired = expected
        return max(0, healthy - desired), healthy, max(desired, 0), expected

    def _budgets_for(self, pod: Obj) -> list[Obj]:
        labels = pod["metadata"].get("labels") or {}
        return [
            b
            for b in self.items(PDBS, pod["metadata"]["namespace"])
            if matches_label_selector(b["spec"].get("selector"), labels)
        ]

    def refresh_budgets(self, pod: Obj) -> None:
        for pdb in self._budgets_for(pod):
            allowed, healthy, desired, expected = self.budget(pdb)
            key = f"{pdb['metadata']['namespace']}/{pdb['metadata']['name']}"
            self.pdb_min_healthy[key] = min(self.pdb_min_healthy.get(key, healthy), healthy)
            fresh = copy.deepcopy(pdb)
            fresh["status"] = {
                "observedGeneration": pdb["metadata"].get("generation", 1),
                "disruptionsAllowed": allowed,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
            }
            self.put(fresh)

    def evict(self, ns: str, name: str) -> tuple[int, Obj, list[FollowUp]]:
        """The eviction subresource: (HTTP status, Status body, follow-ups)."""
        pod = self.get(PODS, ns, name)
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found'), []
        if pod["metadata"].get("deletionTimestamp"):
            return 201, _status(201, "", ""), []
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            budgets = self._budgets_for(pod)
            if len(budgets) > 1:
                message = (
                    "This pod has more than one PodDisruptionBudget, which the eviction"
                    " subresource does not support."
                )
                return 500, _status(500, "InternalError", message), []
            if budgets:
                allowed, healthy, desired, _ = self.budget(budgets[0])
                if allowed <= 0 and (is_ready(pod) or healthy < desired):
                    self.note("evict-blocked", f"{ns}/{name}")
                    cause = (
                        f"The disruption budget {budgets[0]['metadata']['name']} needs"
                        f" {desired} healthy pods and has {healthy} currently"
                    )
                    body = _status(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        causes=[{"reason": "DisruptionBudget", "message": cause}],
                    )
                    return 429, body, []
        self.note("evicted", f"{ns}/{name}")
        return 201, _status(201, "", ""), self.pod_deleted(pod)

    # -- controllers ---------------------------------------------------------------------
    def pod_deleted(self, pod: Obj) -> list[FollowUp]:
        """Remove a pod (if still there) and let its controller replace it."""
        meta = pod["metadata"]
        self.remove(PODS, meta["namespace"], meta["name"])
        self.refresh_budgets(pod)
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
        if not owners:
            return []
        owner = self.get(KINDS[owners[0]["kind"]], meta["namespace"], owners[0]["name"])
        if owner is None:
            return []
        kind = owner["kind"]
        name = {
            "StatefulSet": meta["name"],
            "DaemonSet": f"{owner['metadata']['name']}-{self._suffix()}",
        }.get(kind, f"{owner['metadata']['name']}-{self._suffix()}")
        node = pod["spec"].get("nodeName") if kind == "DaemonSet" else self.schedule(owner)
        fresh = objs.pod_from_template(owner, name, node_name=node, ready=False)
        fresh["metadata"]["labels"] = dict(meta.get("labels") or {})
        follow = self._start_pod(fresh)
        self.refresh_owner(pod)
        return follow

    def _start_pod(self, pod: Obj) -> list[FollowUp]:
        if self.injector is not None:
            pod = self.injector(pod, self)
        self.put(pod)
        self.refresh_budgets(pod)
        meta = pod["metadata"]
        if not pod["spec"].get("nodeName"):
            return []
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        return [(self.ready_delay, lambda: self.mark_ready(ns, name, uid))]

    def _suffix(self) -> str:
        return "".join(self._rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))

    def schedule(self, owner: Obj) -> str | None:
        """The least loaded Ready, schedulable node matching the template's nodeSelector."""
        selector = owner["spec"]["template"]["spec"].get("nodeSelector") or {}
        load: dict[str, int] = {}
        for p in self.items(PODS):
            node = p["spec"].get("nodeName")
            if node:
                load[node] = load.get(node, 0) + 1
        fits = [
            n["metadata"]["name"]
            for n in self.items(NODES)
            if not n["spec"].get("unschedulable")
            and _node_ready(n)
            and all(n["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
        ]
        return min(fits, key=lambda n: (load.get(n, 0), n)) if fits else None

    def mark_ready(self, ns: str, name: str, uid: str) -> list[FollowUp]:
        pod = self.get(PODS, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return []
        start = objs.rfc3339()
        pod["status"] = objs.pod_status(pod["spec"], scheduled=True, ready=True, start=start)
        self.put(pod)
        self.refresh_budgets(pod)
        self.refresh_owner(pod)
        return []

    def schedule_pending(self) -> list[FollowUp]:
        """Place Pending unscheduled pods now that a node may have room (uncordon)."""
        follow: list[FollowUp] = []
        for pod in self.items(PODS):
            if pod["spec"].get("nodeName"):
                continue
            owners = pod["metadata"].get("ownerReferences") or [{}]
            owner = self.get(
                KINDS.get(owners[0].get("kind", ""), PODS),
                pod["metadata"]["namespace"],
                owners[0].get("name", ""),
            )
            node = self.schedule(owner) if owner and "template" in owner.get("spec", {}) else None
            if node:
                fresh = copy.deepcopy(pod)
                fresh["spec"]["nodeName"] = node
                fresh["status"] = objs.pod_status(
                    fresh["spec"], scheduled=True, ready=False, start=objs.rfc3339()
                )
                follow += self._start_pod(fresh)
        return follow

    def refresh_owner(self, pod: Obj) -> None:
        """Recompute the ready counts of the workload that owns ``pod`` (via its ReplicaSet)."""
        from support.k8s_rollout import refresh_workload_status  # noqa: PLC0415 - cycle

        ns = pod["metadata"]["namespace"]
        refs = [o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")]
        owner = self.get(KINDS[refs[0]["kind"]], ns, refs[0]["name"]) if refs else None
        if owner is not None and owner["kind"] == "ReplicaSet":
            up = [o for o in owner["metadata"].get("ownerReferences") or [] if o.get("controller")]
            owner = self.get(KINDS[up[0]["kind"]], ns, up[0]["name"]) if up else None
        if owner is not None and KINDS[owner["kind"]] in WORKLOADS:
            refresh_workload_status(self, owner)

    def after_patch(self, r: Res, before: Obj | None, after: Obj | None) -> list[FollowUp]:
        """React to a PATCH: uncordon schedules pending pods; a template change rolls out."""
        from support.k8s_rollout import start_rollout  # noqa: PLC0415 - cycle

        if before is None or after is None:
            return []
        if (
            r == NODES
            and before["spec"].get("unschedulable")
            and not after["spec"].get("unschedulable")
        ):
            return self.schedule_pending()
        if r in WORKLOADS and before["spec"].get("template") != after["spec"].get("template"):
            return start_rollout(self, after)
        return []


def _node_ready(node: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )
