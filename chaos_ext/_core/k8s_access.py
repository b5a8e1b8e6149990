"""May these credentials do it? Access reviews of the Kubernetes API, for ``gameday plan``.

An :class:`Access` is one request the API server would authorize: a verb on a
resource (``pods``, ``pods/eviction``), in a namespace (``""``: cluster-wide,
which for a namespaced resource means every namespace), optionally one object
by name. A plan lists the accesses its action makes (read from the action's
code, with why each is needed) and :func:`access_checks` asks the API server
about each with a SelfSubjectAccessReview (what ``kubectl auth can-i`` does):
the answer comes from the cluster's authorizers (RBAC and any other) for the
credentials the action will use. Creating a SelfSubjectAccessReview needs no
permission (every authenticated user may, ``system:basic-user``) and stores
nothing.

The answers are preflight checks (docs/conventions.md §7): one failed check
per denied access, named ``RBAC: <verb> <resource>`` and saying where it is
denied and what needs it, or one passing ``RBAC`` check listing what was
allowed. :func:`accesses` turns a declared :class:`~chaos_ext._core.rbac.Rule`
(``@needs_k8s``) into accesses, so the two stay in one vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from chaos_ext._core.contract import preflight_check
from chaos_ext._core.k8s import read_json
from chaos_ext._core.rbac import Rule
from chaos_ext.errors import ChaosExtError

__all__ = ["Access", "access_checks", "accesses", "review"]


@dataclass(frozen=True)
class Access:
    """One request to authorize: ``verb`` on ``resource`` (``pods/eviction``) of ``group``.

    ``namespace`` "" is cluster-wide (every namespace, for a namespaced
    resource); ``name`` "" is any object. ``why`` says what needs it.
    """

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""
    name: str = ""
    why: str = ""

    @property
    def what(self) -> str:
        """``create pods/eviction``, ``create jobs.batch``, ``get namespaces/kube-system``."""
        base, _, sub = self.resource.partition("/")
        qualified = f"{base}.{self.group}" if self.group else base
        shown = f"{qualified}/{sub}" if sub else qualified
        return f"{self.verb} {shown}" + (f" {self.name}" if self.name else "")

    @property
    def where(self) -> str:
        return f"in namespace {self.namespace}" if self.namespace else "cluster-wide"

    def attributes(self) -> client.V1ResourceAttributes:
        base, _, sub = self.resource.partition("/")
        return client.V1ResourceAttributes(
            verb=self.verb,
            group=self.group,
            resource=base,
            subresource=sub or None,
            namespace=self.namespace or None,
            name=self.name or None,
        )


def accesses(rule: Rule, namespace: str = "", why: str = "") -> list[Access]:
    """The accesses of a declared rule: one per verb (and resource name), in ``namespace``."""
    where = "" if rule.cluster_scoped else namespace
    return [
        Access(verb, rule.resource, rule.api_group, where, name, why)
        for verb in rule.verbs
        for name in rule.resource_names or ("",)
    ]


def _unique(wanted: Iterable[Access]) -> list[Access]:
    seen: dict[tuple[str, ...], Access] = {}
    for access in wanted:
        key = (access.verb, access.group, access.resource, access.namespace, access.name)
        seen.setdefault(key, access)
    return list(seen.values())


def review(api: client.ApiClient, wanted: Iterable[Access]) -> list[tuple[Access, bool, str]]:
    """``(access, allowed, reason)`` for each distinct access, as the API server answers.

    Raises KubernetesError when the API server cannot be asked.
    """
    authz = client.AuthorizationV1Api(api)
    answers = []
    for access in _unique(wanted):
        body = client.V1SelfSubjectAccessReview(
            api_version="authorization.k8s.io/v1",
            kind="SelfSubjectAccessReview",
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=access.attributes()),
        )
        answer = read_json(
            authz.create_self_subject_access_review,
            body,
            what=f"ask the API server whether we may {access.what} {access.where}",
        )
        status: dict[str, Any] = answer.get("status") or {}
        reason = str(status.get("reason") or status.get("evaluationError") or "")
        answers.append((access, status.get("allowed") is True, reason))
    return answers


def access_checks(api: client.ApiClient, wanted: Iterable[Access]) -> list[dict[str, Any]]:
    """Preflight checks: one per denied access, else one listing every allowed access.

    An API server that cannot be asked is one failed ``RBAC`` check saying why.
    """
    try:
        answers = review(api, wanted)
    except ChaosExtError as exc:
        return [preflight_check("RBAC", False, f"cannot check the permissions: {exc}")]
    denied = [
        preflight_check(
            f"RBAC: {a.what}",
            False,
            f"{a.what} is denied {a.where}"
            + (f" (needed to {a.why})" if a.why else "")
            + (f": {reason}" if reason else ""),
        )
        for a, allowed, reason in answers
        if not allowed
    ]
    if denied:
        return denied
    shown = "; ".join(f"{a.what} {a.where}" for a, _, _ in answers)
    return [preflight_check("RBAC", True, f"{len(answers)} access(es) allowed: {shown}")]
