"""Pod targets: resolve a pod to its node, node address and container over the Kubernetes API,
then find the container's process on the node (crictl over SSH) to enter its network namespace.

RBAC: ``get`` on ``pods`` (namespaced) and ``get`` on ``nodes`` (cluster). On the
node: ``crictl`` (containerd/CRI-O) and ``nsenter`` (util-linux), a root SSH user.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.rbac import Rule
from chaos_ext._core.ssh import SshSession
from chaos_ext._core.targets.spec import Target, require_container_id
from chaos_ext.errors import TransportError

__all__ = ["RULES", "PodPlacement", "container_pid", "resolve_pod"]

RULES = (
    Rule("", "pods", ("get",)),
    Rule("", "nodes", ("get",), cluster_scoped=True),
)


@dataclass(frozen=True)
class PodPlacement:
    """Where a pod runs: node name and address, and the container to enter."""

    namespace: str
    pod: str
    node: str
    node_address: str
    container: str
    container_id: str
    runtime: str


def resolve_pod(target: Target, secrets: Mapping[str, Any] | None) -> PodPlacement:
    """Pod -> node, node InternalIP (else ExternalIP, else hostname), running container."""
    # the Kubernetes client takes ~1.5 s to import: only pod targets pay for it
    from kubernetes import client  # noqa: PLC0415

    from chaos_ext._core import k8s as _k8s  # noqa: PLC0415

    api = client.CoreV1Api(_k8s.api_client(secrets))
    pod = _k8s.call(
        api.read_namespaced_pod,
        target.name,
        target.namespace,
        what=f"read pod {target.namespace}/{target.name}",
    )
    node_name = pod.spec.node_name if pod.spec else None
    if not node_name:
        raise TransportError(f"pod {target.namespace}/{target.name} is not scheduled on a node yet")
    statuses = (pod.status.container_statuses if pod.status else None) or []
    wanted = target.container or (statuses[0].name if statuses else "")
    status = next((s for s in statuses if s.name == wanted), None)
    if status is None or not status.container_id:
        raise TransportError(
            f"pod {target.namespace}/{target.name} has no running container {wanted!r} "
            f"(containers: {[s.name for s in statuses]})"
        )
    runtime, _, container_id = status.container_id.partition("://")
    node = _k8s.call(api.read_node, node_name, what=f"read node {node_name}")
    listed = (node.status.addresses if node.status else None) or []
    addresses = {a.type: a.address for a in listed}
    address = (
        addresses.get("InternalIP") or addresses.get("ExternalIP") or addresses.get("Hostname")
    )
    if not address:
        raise TransportError(f"node {node_name} reports no address to SSH to")
    return PodPlacement(
        target.namespace, target.name, node_name, address, wanted, container_id, runtime
    )


def container_pid(session: SshSession, placement: PodPlacement) -> int:
    """The container's main pid on its node (``crictl inspect``)."""
    require_container_id(placement.container_id)
    out = session.check(
        [
            "crictl",
            "inspect",
            "--output",
            "go-template",
            "--template",
            "{{.info.pid}}",
            placement.container_id,
        ]
    )
    try:
        pid = int(out.strip())
    except ValueError:
        raise TransportError(
            f"crictl on {placement.node} gave no pid for {placement.container_id[:12]}: {out!r}"
        ) from None
    if pid <= 0:
        raise TransportError(f"container {placement.container} of {placement.pod} is not running")
    return pid
