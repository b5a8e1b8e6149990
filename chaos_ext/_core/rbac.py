"""Kubernetes permissions an activity needs, declared beside the activity.

``gameday schedule`` computes a least-privilege Role/ClusterRole from the
activities an experiment uses, so every activity that calls the Kubernetes API
declares what it calls::

    @needs_k8s(
        Rule("", "nodes", ("get", "list", "patch"), cluster_scoped=True),
        Rule("", "pods/eviction", ("create",)),
    )
    def drain_nodes(...): ...

Activities without a declaration need no Kubernetes access. Rules that only
some uses need carry a condition on the activity's arguments, so an experiment
that does not use them is not granted them::

    @needs_k8s(Rule("batch", "jobs", ("create", "get", "delete")), when=uses_kubernetes)
    def drive_http_load(...): ...

When the arguments are unknown (``rbac_of(func)``), every rule is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["Rule", "needs_k8s", "rbac_of"]

F = TypeVar("F", bound=Callable[..., Any])
Condition = Callable[[Mapping[str, Any]], bool]
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


def needs_k8s(*rules: Rule, when: Condition | None = None) -> Callable[[F], F]:
    """Declare the Kubernetes API access an activity needs (``when`` its arguments say so)."""

    def attach(func: F) -> F:
        setattr(func, _ATTR, (*getattr(func, _ATTR, ()), *((rule, when) for rule in rules)))
        return func

    return attach


def rbac_of(
    func: Callable[..., Any], arguments: Mapping[str, Any] | None = None
) -> tuple[Rule, ...]:
    """The rules ``func`` needs (empty when it needs no Kubernetes access).

    With ``arguments`` (an experiment's provider arguments), conditional rules
    count only when their condition holds; without, all of them count.
    """
    declared: tuple[tuple[Rule, Condition | None], ...] = getattr(func, _ATTR, ())
    return tuple(
        rule for rule, when in declared if when is None or arguments is None or when(arguments)
    )
