"""A test extension whose activities declare Kubernetes RBAC, for `gameday schedule` tests.

The activities are never run by these tests; `gameday schedule` only imports
them and reads their ``@needs_k8s`` declarations.
"""

from __future__ import annotations

from typing import Any

from chaos_ext._core.rbac import Rule, needs_k8s

__all__ = ["drain_node", "no_kubernetes", "patch_sidecar", "pods_ready"]


@needs_k8s(
    Rule("", "nodes", ("get", "list", "patch"), cluster_scoped=True),
    Rule("", "pods", ("list",)),
    Rule("", "pods/eviction", ("create",)),
)
def drain_node(name: str, configuration: Any = None, secrets: Any = None) -> dict[str, Any]:
    """Cordon and drain one node (test double: declares what a drain calls)."""
    return {"drained": name}


@needs_k8s(Rule("", "pods", ("get", "list")))
def pods_ready(namespace: str, configuration: Any = None, secrets: Any = None) -> bool:
    """Whether every pod of a namespace is ready (test double)."""
    return bool(namespace)


@needs_k8s(Rule("apps", "deployments", ("get", "patch")))
def patch_sidecar(
    deployment: str, image: str, configuration: Any = None, secrets: Any = None
) -> dict[str, Any]:
    """Change a sidecar's image in a deployment's template (test double)."""
    return {"patched": deployment, "image": image}


def no_kubernetes(value: int = 0) -> int:
    """Needs no Kubernetes access (test double)."""
    return value
