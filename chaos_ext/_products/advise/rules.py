"""The rules of ``gameday advise``: risks found in fetched objects (pure functions).

Every function takes the manifests as the API returns them (dicts) and
returns :class:`~.risks.Risk` (or None when the objects do not show it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos_ext._products.advise.risks import Risk
from chaos_ext.node.budgets import selector_matches

__all__ = [
    "Ceiling",
    "PoolSource",
    "dns_cache_risk",
    "effective_ndots",
    "ndots_risk",
    "pool_nodes",
    "pool_risk",
    "pool_size",
    "replica_risks",
    "workload_of",
]

Manifest = Mapping[str, Any]
WorkloadKey = tuple[str, str, str]  # (kind, namespace, name)
CLUSTER_FIRST_NDOTS = 5  # what the kubelet writes for ClusterFirst without an override
RESOLVER_NDOTS = 1  # glibc's default (dnsPolicy None without an ndots option)


def _meta(obj: Manifest) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _label(key: WorkloadKey) -> str:
    kind, namespace, name = key
    return f"{kind} {namespace}/{name}"


def effective_ndots(spec: Manifest) -> int | None:
    """The ``ndots`` of the resolv.conf the kubelet writes for this pod spec.

    ClusterFirst (the default; with hostNetwork only as ClusterFirstWithHostNet)
    gives 5 unless ``dnsConfig.options`` sets ndots; ``None`` gives the option or
    the resolver's 1; ``Default`` (the node's resolv.conf) gives None: not known here.
    """
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    host_network = bool(spec.get("hostNetwork"))
    if policy == "ClusterFirstWithHostNet" or (policy == "ClusterFirst" and not host_network):
        base: int | None = CLUSTER_FIRST_NDOTS
    elif policy == "None":
        base = RESOLVER_NDOTS
    else:
        base = None
    for option in (spec.get("dnsConfig") or {}).get("options") or ():
        if option.get("name") == "ndots":
            try:
                return int(str(option.get("value")))
            except ValueError:
                return base
    return base


def workload_of(pod: Manifest) -> WorkloadKey:
    """The workload that owns a pod: a ReplicaSet's pod belongs to its Deployment."""
    meta = _meta(pod)
    namespace = str(meta.get("namespace", ""))
    owners = [o for o in meta.get("ownerReferences") or () if o.get("controller", True)]
    if not owners:
        return ("Pod", namespace, str(meta.get("name", "")))
    kind, name = str(owners[0].get("kind")), str(owners[0].get("name"))
    template_hash = (meta.get("labels") or {}).get("pod-template-hash")
    if kind == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
        return ("Deployment", namespace, name[: -len(template_hash) - 1])
    return (kind, namespace, name)


def ndots_risk(pods: Iterable[Manifest]) -> Risk | None:
    """Pods whose resolv.conf has ndots >= 5, per workload."""
    counts: Counter[WorkloadKey] = Counter()
    for pod in pods:
        ndots = effective_ndots(pod.get("spec") or {})
        if ndots is not None and ndots >= CLUSTER_FIRST_NDOTS:
            counts[workload_of(pod)] += 1
    if not counts:
        return None
    objects = tuple(f"{_label(k)} ({n} pods)" for k, n in sorted(counts.items()))
    total = sum(counts.values())
    evidence = (
        f"{total} pod(s) in {len(counts)} workload(s) resolve with ndots:5 (dnsPolicy "
        "ClusterFirst and no dnsConfig ndots option): a name with fewer than 5 dots is "
        "tried with every search domain first, several lookups per external name"
    )
    return Risk("ndots-5", objects, evidence, {"pods": total})


def _containers(template_spec: Manifest) -> list[Manifest]:
    return [*(template_spec.get("containers") or ()), *(template_spec.get("initContainers") or ())]


def _pod_spec(workload: Manifest) -> Manifest:
    return ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}


def _matches_label(obj: Manifest, name: str, app: str) -> bool:
    labels = _meta(obj).get("labels") or {}
    return _meta(obj).get("name") == name or labels.get("k8s-app") == app


def dns_cache_risk(deployments: Iterable[Manifest], daemonsets: Iterable[Manifest]) -> Risk | None:
    """kube-dns with a ``dnsmasq`` container, and no ``node-local-dns`` DaemonSet in front of it."""
    if any(_matches_label(ds, "node-local-dns", "node-local-dns") for ds in daemonsets):
        return None
    found = [
        d
        for d in deployments
        if _matches_label(d, "kube-dns", "kube-dns")
        and any(c.get("name") == "dnsmasq" for c in _containers(_pod_spec(d)))
    ]
    if not found:
        return None
    objects = tuple(f"Deployment {_meta(d).get('namespace')}/{_meta(d).get('name')}" for d in found)
    evidence = (
        "kube-dns answers through dnsmasq (a few TCP children, --dns-forward-max) and no "
        "node-local-dns DaemonSet caches in front of it: every pod's lookups reach it"
    )
    return Risk("dns-no-cache", objects, evidence)


@dataclass(frozen=True)
class PoolSource:
    """Where a Deployment says its connection pool size: an env var or an annotation."""

    env: str | None = None
    annotation: str | None = None

    def describe(self) -> str:
        parts = [f"env {self.env}" if self.env else "", f"annotation {self.annotation or ''}"]
        return " or ".join(p for p in parts if p and not p.endswith(" "))


def pool_size(deployment: Manifest, source: PoolSource) -> int | None:
    """The pool size the Deployment declares (a literal env value or an annotation), or None."""
    if source.annotation:
        template_meta = ((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}
        for annotations in (_meta(deployment).get("annotations"), template_meta.get("annotations")):
            value = (annotations or {}).get(source.annotation)
            if value is not None and str(value).strip().isdigit():
                return int(str(value))
    if source.env:
        for container in _containers(_pod_spec(deployment)):
            for env in container.get("env") or ():
                value = env.get("value")
                if env.get("name") == source.env and value is not None and str(value).isdigit():
                    return int(str(value))
    return None


@dataclass(frozen=True)
class Ceiling:
    """The connections the app can open: the lowest of the server's and the measured."""

    connections: int
    evidence: str


def _peak(deployment: Manifest, hpas: Sequence[Manifest]) -> tuple[int, str]:
    meta = _meta(deployment)
    replicas = int((deployment.get("spec") or {}).get("replicas", 1))
    peak, how = replicas, f"replicas {replicas}"
    for hpa in hpas:
        spec = hpa.get("spec") or {}
        target = spec.get("scaleTargetRef") or {}
        same = _meta(hpa).get("namespace") == meta.get("namespace")
        if same and target.get("kind") == "Deployment" and target.get("name") == meta.get("name"):
            most = int(spec.get("maxReplicas", 0))
            if most > peak:
                peak, how = most, f"HPA {_meta(hpa).get('name')} maxReplicas {most}"
    return peak, how


def pool_risk(
    deployments: Iterable[Manifest],
    hpas: Sequence[Manifest],
    source: PoolSource,
    ceiling: Ceiling,
) -> Risk | None:
    """Deployments whose peak replicas x pool size exceed the ceiling (alone, else together)."""
    rows = []
    for deployment in deployments:
        size = pool_size(deployment, source)
        if size is None:
            continue
        peak, how = _peak(deployment, hpas)
        name = f"Deployment {_meta(deployment).get('namespace')}/{_meta(deployment).get('name')}"
        rows.append((name, peak * size, f"{how} x pool {size} = {peak * size}"))
    total = sum(connections for _, connections, _ in rows)
    alone = [r for r in rows if r[1] > ceiling.connections]
    if total <= ceiling.connections:
        return None
    shown = alone or rows
    objects = tuple(f"{name}: {text}" for name, _, text in shown)
    together = "" if alone else f" together ({total} connections)"
    evidence = (
        f"{len(shown)} Deployment(s){together} can open more connections than the "
        f"database's ceiling of {ceiling.connections} ({ceiling.evidence})"
    )
    return Risk(
        "pool-over-ceiling",
        objects,
        evidence,
        {"ceiling": ceiling.connections, "total_connections": total, "pool": source.describe()},
    )


def pool_nodes(nodes: Iterable[Manifest], selector: str) -> set[str]:
    """The names of the nodes a ``key=value`` (or ``key``) selector picks; "" picks all."""
    key, _, value = selector.partition("=")
    chosen = set()
    for node in nodes:
        labels = _meta(node).get("labels") or {}
        if not selector or (key in labels and (not value or labels[key] == value)):
            chosen.add(str(_meta(node).get("name")))
    return chosen


def _hpa_min(hpas: Sequence[Manifest], key: WorkloadKey) -> int:
    kind, namespace, name = key
    for hpa in hpas:
        target = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        if _meta(hpa).get("namespace") == namespace and (
            target.get("kind"),
            target.get("name"),
        ) == (kind, name):
            return int((hpa.get("spec") or {}).get("minReplicas", 1))
    return 0


def replica_risks(
    workloads: Iterable[Manifest],
    pods: Iterable[Manifest],
    pdbs: Sequence[Manifest],
    hpas: Sequence[Manifest],
    nodes: set[str],
) -> list[Risk]:
    """Deployments and StatefulSets with a pod on ``nodes``: one replica, or no budget."""
    on_pool = {workload_of(p) for p in pods if (p.get("spec") or {}).get("nodeName") in nodes}
    single, unbudgeted = [], []
    for workload in workloads:
        meta = _meta(workload)
        key = (str(workload.get("kind")), str(meta.get("namespace")), str(meta.get("name")))
        if key not in on_pool:
            continue
        replicas = int((workload.get("spec") or {}).get("replicas", 1))
        if max(replicas, _hpa_min(hpas, key)) <= 1:
            single.append(_label(key))
        labels = (((workload.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
            "labels"
        ) or {}
        budgets = [
            p
            for p in pdbs
            if _meta(p).get("namespace") == key[1]
            and selector_matches((p.get("spec") or {}).get("selector"), labels)
        ]
        if not budgets:
            unbudgeted.append(_label(key))
    found = []
    if single:
        found.append(
            Risk(
                "single-replica",
                tuple(sorted(single)),
                f"{len(single)} workload(s) run one replica on the pool's nodes: a drain "
                "or a node loss takes each one down until it is rescheduled",
            )
        )
    if unbudgeted:
        found.append(
            Risk(
                "no-pdb",
                tuple(sorted(unbudgeted)),
                f"{len(unbudgeted)} workload(s) on the pool's nodes have no "
                "PodDisruptionBudget: a drain may evict all their pods at once",
            )
        )
    return found
