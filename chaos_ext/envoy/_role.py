"""What kind of proxy a configuration belongs to: gateway, sidecar, waypoint. Pure.

Istio writes the proxy type first in the node id (``router~IP~POD.NS~NS.svc...``
for gateways, ``sidecar~...``, ``waypoint~...``). Without such an id, a
``virtualInbound`` listener or inbound listeners mark an Istio sidecar; anything
else is treated as an edge proxy (a plain Envoy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext.envoy._dump import EdgeConfig

__all__ = ["ROLES", "Role", "detect_role"]

ROLES = ("gateway", "sidecar", "waypoint", "edge")
_ISTIO_TYPES = {"router": "gateway", "sidecar": "sidecar", "waypoint": "waypoint"}


@dataclass(frozen=True)
class Role:
    """The proxy's role, the evidence for it, and what the fix writers need."""

    role: str  # gateway | sidecar | waypoint | edge
    evidence: str
    pod_ip: str = ""
    namespace: str = ""
    workload: str = ""
    labels: Mapping[str, str] | None = None


def _node_fields(node: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(istio type, pod IP, namespace, pod) from ``type~IP~POD.NS~NS.svc.domain``."""
    parts = str(node.get("id") or "").split("~")
    if len(parts) != 4:
        return "", "", "", ""
    pod, _, namespace = parts[2].partition(".")
    return parts[0], parts[1], namespace, pod


def detect_role(config: EdgeConfig) -> Role:
    """The role of the proxy whose configuration this is."""
    node = config.bootstrap.value.get("node") or {}
    metadata = node.get("metadata") or {}
    kind, pod_ip, namespace, _pod = _node_fields(node)
    labels = metadata.get("LABELS") if isinstance(metadata.get("LABELS"), dict) else None
    workload = str(metadata.get("WORKLOAD_NAME") or "")
    where = f"{config.bootstrap.path}.node.id"
    if kind in _ISTIO_TYPES:
        return Role(
            _ISTIO_TYPES[kind], f"{where} = {node.get('id')!r}", pod_ip, namespace, workload, labels
        )
    if any(item.name == "virtualInbound" for item in config.listeners):
        return Role("sidecar", "a listener named virtualInbound (Istio sidecar)")
    return Role("edge", "no Istio node id and no sidecar listeners: an edge proxy", labels=labels)
