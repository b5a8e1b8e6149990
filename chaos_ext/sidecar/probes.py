"""Sidecar probes: drift between running pods and the injector's current template."""

from collections.abc import Mapping
from typing import Any

from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.k8s import api_client
from chaos_ext._core.rbac import Rule, needs_k8s
from chaos_ext._core.validation import validated_by
from chaos_ext.sidecar import _drift, _observe

__all__ = ["sidecar_drift"]


def _check(args: Mapping[str, Any]) -> None:
    _observe.check_query(args)


@needs_k8s(
    Rule("", "configmaps", ("get",)),
    Rule("", "pods", ("list",), cluster_scoped=True),
    Rule("apps", "replicasets", ("list",), cluster_scoped=True),
)
@validated_by(_check)
def sidecar_drift(
    container_name: str = "istio-proxy",
    configmap_name: str = "istio-sidecar-injector",
    configmap_namespace: str = "istio-system",
    template_format: str = "istio",
    values_key: str = "values",
    config_key: str = "config",
    include_namespaces: list[str] | None = None,
    exclude_namespaces: list[str] | None = None,
    label_selector: str = "",
    started_before: str = "",
    max_workloads: int = 50,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Find pods whose injected sidecar differs from what the injector injects today.

    Compares every pod's `container_name` sidecar (also as a native sidecar)
    with the template in the injector ConfigMap (Istio: image, istio-init
    image, args, env, resources, the revision in `sidecar.istio.io/status`,
    injected annotations; per-pod `sidecar.istio.io/*` overrides honoured),
    per workload (Deployment via its ReplicaSets, StatefulSet, DaemonSet...).
    With `started_before` (RFC 3339) it also counts the pods started before
    that time (`started_before`, `drifted_started_before`); `label_selector`
    narrows the pods looked at. The same query arguments select what
    `rollout_drifted_workloads` restarts. Returns counts (`drifted_pods`,
    `drifted_workloads`) and the first differences of the most drifted
    workloads. Read-only.
    """
    query = _observe.check_query(locals())
    workloads, without, template = _observe.measure(api_client(secrets), query)
    return _drift.report(
        workloads, without, template, container_name=container_name, max_workloads=max_workloads
    )
