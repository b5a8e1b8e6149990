"""A test double of the API server's RBAC authorizer, behind the emulator's access reviews.

kmock authorizes nothing: every request it serves is allowed. What a plan asks
(``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``) is answered
here instead, from rules the test sets (:meth:`EmulatorHandle.allow`), with the
matching rules of Kubernetes RBAC (``k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac``,
Apache-2.0, read for the semantics, no code taken):

* a rule matches a verb, an API group and a resource (``pods/eviction`` for a
  subresource; ``*`` matches any) when each is listed in it;
* a rule with ``namespace`` None is bound cluster-wide (a ClusterRoleBinding)
  and matches any namespace and cluster-wide requests; a rule with a
  namespace (a RoleBinding) matches only requests in that namespace, never a
  cluster-wide one (listing pods of every namespace needs a cluster binding);
* ``resourceNames`` restricts a rule to requests naming one of those objects:
  a request without a name (list, create) is not matched.

With no rules set, every request is allowed (the emulator's credentials act as
cluster-admin), so tests that do not care about RBAC are not affected. Only
allow rules exist, as in RBAC. This is not the API server's authorizer chain
(no webhook, no Node authorizer, no aggregation of ClusterRoles).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AllowRule", "RuleAuthorizer", "review_response"]


@dataclass(frozen=True)
class AllowRule:
    """One allow rule: ``verbs`` on ``resources`` of ``groups``, in ``namespace`` (None: all)."""

    verbs: tuple[str, ...]
    resources: tuple[str, ...]
    groups: tuple[str, ...] = ("",)
    namespace: str | None = None
    names: tuple[str, ...] = ()

    def matches(self, attributes: Mapping[str, Any]) -> bool:
        resource = str(attributes.get("resource") or "")
        if attributes.get("subresource"):
            resource += f"/{attributes['subresource']}"
        namespace = attributes.get("namespace") or ""
        name = attributes.get("name") or ""
        return (
            _listed(str(attributes.get("verb") or ""), self.verbs)
            and _listed(str(attributes.get("group") or ""), self.groups)
            and _listed(resource, self.resources)
            and (self.namespace is None or (bool(namespace) and namespace == self.namespace))
            and (not self.names or (bool(name) and name in self.names))
        )


def _listed(value: str, allowed: Iterable[str]) -> bool:
    return any(a in ("*", value) for a in allowed)


class RuleAuthorizer:
    """Answers access reviews from allow rules; ``rules`` None allows everything."""

    def __init__(self) -> None:
        self.rules: list[AllowRule] | None = None
        self.reviews: list[str] = []  # "verb group/resource namespace name -> allowed", in order

    def allowed(self, attributes: Mapping[str, Any]) -> bool:
        verdict = self.rules is None or any(rule.matches(attributes) for rule in self.rules)
        resource = str(attributes.get("resource") or "")
        if attributes.get("subresource"):
            resource += f"/{attributes['subresource']}"
        self.reviews.append(
            f"{attributes.get('verb')} {attributes.get('group') or ''}/{resource}"
            f" {attributes.get('namespace') or ''} {attributes.get('name') or ''}"
            f" -> {'allowed' if verdict else 'denied'}"
        )
        return verdict


def review_response(authorizer: RuleAuthorizer, body: Mapping[str, Any]) -> dict[str, Any]:
    """The SelfSubjectAccessReview the API server sends back: the request with its status."""
    spec = body.get("spec") if isinstance(body.get("spec"), Mapping) else {}
    attributes = (spec or {}).get("resourceAttributes") or {}
    allowed = authorizer.allowed(attributes)
    # RBAC gives a reason only when it allows (the binding); a denial is a bare "allowed": false
    status = (
        {"allowed": True, "reason": "allowed by a rule the test set"}
        if allowed
        else {"allowed": False}
    )
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "metadata": {},
        "spec": dict(spec or {}),
        "status": status,
    }
