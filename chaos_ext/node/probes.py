"""Node probes: Ready nodes, pending pods, Deployment readiness and HPA replicas."""

from typing import Any

from kubernetes import client

from chaos_ext._core.contract import Configuration, Secrets
from chaos_ext._core.k8s import api_client, list_items, read_json
from chaos_ext._core.rbac import Rule, needs_k8s
from chaos_ext._core.validation import require_name, require_range, validated_by
from chaos_ext._core.wait import poll
from chaos_ext.node import _status

__all__ = ["deployment_ready_ratio", "hpa_replicas", "nodes_ready", "pods_pending"]


@needs_k8s(Rule("", "nodes", ("list",), cluster_scoped=True))
@validated_by()
def nodes_ready(
    label_selector: str = "",
    wait_seconds: float = 0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Count the Ready, not Ready and cordoned nodes that match a label selector.

    With `wait_seconds`, polls until every matching node is Ready and schedulable
    (or the wait ends) and returns the last count. Read-only. Use
    `$.all_ready_and_schedulable` in a jsonpath tolerance after a drain's rollback.
    """
    require_range("wait_seconds", wait_seconds, 0, 3600)
    core = client.CoreV1Api(api_client(secrets))

    def fetch() -> dict[str, Any]:
        nodes = list_items(
            core.list_node,
            label_selector=label_selector,
            what=f"list nodes matching {label_selector!r}",
        )
        return _status.node_summary(nodes)

    return poll(fetch, lambda s: bool(s["all_ready_and_schedulable"]), wait_seconds=wait_seconds)


@needs_k8s(Rule("", "pods", ("list",), cluster_scoped=True))
@validated_by()
def pods_pending(
    namespace: str = "",
    label_selector: str = "",
    min_age_seconds: float = 0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Count Pending pods and those the scheduler reports Unschedulable.

    `namespace` empty means every namespace; `min_age_seconds` ignores pods that
    were created only moments ago (normal during a rollout). Read-only.
    """
    require_range("min_age_seconds", min_age_seconds, 0, 86_400)
    core = client.CoreV1Api(api_client(secrets))
    what = f"list pods in {namespace or 'all namespaces'}"
    if namespace:
        require_name("namespace", namespace)
        pods = list_items(
            core.list_namespaced_pod,
            namespace,
            label_selector=label_selector,
            field_selector="status.phase=Pending",
            what=what,
        )
    else:
        pods = list_items(
            core.list_pod_for_all_namespaces,
            label_selector=label_selector,
            field_selector="status.phase=Pending",
            what=what,
        )
    return _status.pending_summary(pods, min_age_seconds=min_age_seconds)


@needs_k8s(Rule("apps", "deployments", ("get",)))
@validated_by()
def deployment_ready_ratio(
    name: str,
    namespace: str = "default",
    wait_seconds: float = 0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> float:
    """Ready replicas divided by desired replicas of a Deployment (1.0 = all Ready).

    With `wait_seconds`, polls until the ratio is 1.0 (or the wait ends): "all pods
    Ready again within N minutes" is `wait_seconds=N*60` with a tolerance of 1.0. Read-only.
    """
    require_name("name", name, max_len=253)
    require_name("namespace", namespace)
    require_range("wait_seconds", wait_seconds, 0, 3600)
    apps = client.AppsV1Api(api_client(secrets))

    def fetch() -> float:
        what = f"read deployment {namespace}/{name}"
        return _status.ready_ratio(
            read_json(apps.read_namespaced_deployment, name, namespace, what=what)
        )

    return poll(fetch, lambda ratio: ratio >= 1.0, wait_seconds=wait_seconds)


@needs_k8s(Rule("autoscaling", "horizontalpodautoscalers", ("get",)))
@validated_by()
def hpa_replicas(
    name: str,
    namespace: str = "default",
    wait_seconds: float = 0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Compare an HPA's current and desired replicas and tell whether it is stuck.

    Stuck means it cannot scale or has no usable metric (`AbleToScale` or
    `ScalingActive` False). With `wait_seconds`, polls until current == desired.
    Read-only; tolerate with a jsonpath on `$.stuck` (false) or `$.converged`.
    """
    require_name("name", name, max_len=253)
    require_name("namespace", namespace)
    require_range("wait_seconds", wait_seconds, 0, 3600)
    autoscaling = client.AutoscalingV2Api(api_client(secrets))

    def fetch() -> dict[str, Any]:
        hpa = read_json(
            autoscaling.read_namespaced_horizontal_pod_autoscaler,
            name,
            namespace,
            what=f"read HPA {namespace}/{name}",
        )
        return _status.hpa_summary(hpa)

    return poll(fetch, lambda s: bool(s["converged"]), wait_seconds=wait_seconds)
