"""Read what sidecar drift is computed from: the injector ConfigMap, pods, ReplicaSets."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes import client

from chaos_ext._core.k8s import iter_items, parse_time, read_json
from chaos_ext._core.validation import require_name, require_range
from chaos_ext.errors import InvalidArgument
from chaos_ext.sidecar import _drift
from chaos_ext.sidecar._lean import lean_pods, lean_replicasets
from chaos_ext.sidecar._template import SidecarTemplate, template_from_configmap
from chaos_ext.sidecar.errors import SidecarError

__all__ = ["QUERY_ARGUMENTS", "DriftQuery", "check_query", "measure", "read_template"]

QUERY_ARGUMENTS = (
    "container_name",
    "configmap_name",
    "configmap_namespace",
    "template_format",
    "values_key",
    "config_key",
    "include_namespaces",
    "exclude_namespaces",
    "label_selector",
    "started_before",
    "max_workloads",
)
"""The drift query's arguments: the first ones of sidecar_drift and rollout_drifted_workloads,
with the same names, defaults and meaning (tests/sidecar check they stay the same)."""


@dataclass(frozen=True)
class DriftQuery:
    """Where the injector template lives and which pods to compare with it."""

    container_name: str = "istio-proxy"
    configmap_name: str = "istio-sidecar-injector"
    configmap_namespace: str = "istio-system"
    template_format: str = "istio"
    values_key: str = "values"
    config_key: str = "config"
    include_namespaces: tuple[str, ...] = ()
    exclude_namespaces: tuple[str, ...] = ()
    label_selector: str = ""
    started_before: datetime | None = None
    page_size: int = 500


def check_query(args: Mapping[str, Any]) -> DriftQuery:
    """Validate the drift arguments shared by the probe and the rollout action."""
    names = {
        "container_name": args.get("container_name", "istio-proxy"),
        "configmap_name": args.get("configmap_name", "istio-sidecar-injector"),
        "configmap_namespace": args.get("configmap_namespace", "istio-system"),
    }
    for label, value in names.items():
        require_name(label, value, max_len=253)
    for key in ("values_key", "config_key"):
        value = args.get(key, key.split("_")[0])
        if not isinstance(value, str) or not value or len(value) > 253:
            raise InvalidArgument(f"{key}: {value!r} is not a ConfigMap key")
    template_format = args.get("template_format", "istio")
    if template_format not in ("istio", "container"):
        raise InvalidArgument(f"template_format: {template_format!r} is not 'istio' or 'container'")
    include = tuple(args.get("include_namespaces") or ())
    exclude = tuple(args.get("exclude_namespaces") or ())
    for ns in (*include, *exclude):
        require_name("namespace", ns)
    started_text = args.get("started_before", "") or ""
    started = parse_time(started_text)
    if started_text and (started is None or started.tzinfo is None):
        raise InvalidArgument(
            f"started_before: {started_text!r} is not an RFC 3339 time such as 2026-11-30T09:00:00Z"
        )
    require_range("max_workloads", args.get("max_workloads", 50), 1, 10_000)
    return DriftQuery(
        container_name=names["container_name"],
        configmap_name=names["configmap_name"],
        configmap_namespace=names["configmap_namespace"],
        template_format=template_format,
        values_key=args.get("values_key", "values"),
        config_key=args.get("config_key", "config"),
        include_namespaces=include,
        exclude_namespaces=exclude,
        label_selector=args.get("label_selector", "") or "",
        started_before=started,
    )


def read_template(
    core: client.CoreV1Api, query: DriftQuery
) -> tuple[dict[str, Any], SidecarTemplate]:
    """The injector ConfigMap and the template read from it."""
    name, ns = query.configmap_name, query.configmap_namespace
    cm = read_json(
        core.read_namespaced_config_map,
        name,
        ns,
        what=f"read ConfigMap {ns}/{name}",
        error=SidecarError,
    )
    data = cm.get("data") or {}
    template = template_from_configmap(
        data,
        template_format=query.template_format,
        values_key=query.values_key,
        config_key=query.config_key,
    )
    return cm, template


def _pods(core: client.CoreV1Api, query: DriftQuery) -> Iterator[dict[str, Any]]:
    """The selected pods, page by page (see ``iter_items``), excluded namespaces skipped."""
    excluded = set(query.exclude_namespaces)
    listings: list[Iterator[dict[str, Any]]] = [
        iter_items(
            core.list_namespaced_pod,
            ns,
            label_selector=query.label_selector,
            page_size=query.page_size,
            what=f"list pods in {ns}",
            error=SidecarError,
            decode=lean_pods,
        )
        for ns in query.include_namespaces
    ] or [
        iter_items(
            core.list_pod_for_all_namespaces,
            label_selector=query.label_selector,
            page_size=query.page_size,
            what="list pods",
            error=SidecarError,
            decode=lean_pods,
        )
    ]
    for pods in listings:
        for pod in pods:
            if (pod.get("metadata") or {}).get("namespace") not in excluded:
                yield pod


def _replicasets(
    apps: client.AppsV1Api, namespaces: Sequence[str], page: int
) -> Iterator[dict[str, Any]]:
    if not namespaces:
        yield from iter_items(
            apps.list_replica_set_for_all_namespaces,
            page_size=page,
            what="list ReplicaSets",
            error=SidecarError,
            decode=lean_replicasets,
        )
        return
    for ns in namespaces:
        yield from iter_items(
            apps.list_namespaced_replica_set,
            ns,
            page_size=page,
            what=f"list ReplicaSets in {ns}",
            error=SidecarError,
            decode=lean_replicasets,
        )


def measure(
    api: client.ApiClient, query: DriftQuery
) -> tuple[dict[_drift.WorkloadKey, _drift.WorkloadDrift], int, SidecarTemplate]:
    """Per-workload drift of the selected pods against the injector's current template."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    _, template = read_template(core, query)
    # ReplicaSets first (kept as a small owners map), then pods streamed a page at a
    # time: the live set stays small, so the garbage collector's passes stay cheap
    owners = _drift.owners_of_replicasets(
        _replicasets(apps, query.include_namespaces, query.page_size)
    )
    workloads, without = _drift.analyse(
        _pods(core, query),
        owners,
        template,
        container_name=query.container_name,
        started_before=query.started_before,
    )
    return workloads, without, template
