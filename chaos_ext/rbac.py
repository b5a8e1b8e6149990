"""Kubernetes permissions an activity needs, declared beside the activity.

``gameday schedule`` computes a least-privilege Role/ClusterRole from the
activities an experiment uses, so every activity that calls the Kubernetes API
declares what it calls::

    @needs_k8s(
        Rule("", "nodes", ("get", "list", "patch"), cluster_scoped=True),
        Rule("", "pods/eviction", ("create",)),
    )
    def drain_nodes(...): ...

Activities without a declaration need no Kubernetes access.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["Rule", "needs_k8s", "rbac_of"]

F = TypeVar("F", bound=Callable[..., Any])
_ATTR = "__gameday_rbac__"


@dataclass(frozen=True, order=True)
class Rule:
    """One RBAC rule: API group ("" for core), resource (with subresource), verbs.

    ``resource_names`` restricts it to named objects (RBAC ``resourceNames``).
    """

    api_group: str
    resource: str
    verbs: tuple[str, ...]
    cluster_scoped: bool = False
    resource_names: tuple[str, ...] = ()


def needs_k8s(*rules: Rule) -> Callable[[F], F]:
    """Declare the Kubernetes API access an activity needs."""

    def attach(func: F) -> F:
        setattr(func, _ATTR, (*getattr(func, _ATTR, ()), *rules))
        return func

    return attach


def rbac_of(func: Callable[..., Any]) -> tuple[Rule, ...]:
    """The rules declared on ``func`` (empty when it needs no Kubernetes access)."""
    rules: tuple[Rule, ...] = getattr(func, _ATTR, ())
    return rules
