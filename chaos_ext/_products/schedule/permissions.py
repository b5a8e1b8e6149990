"""The Kubernetes permissions a set of experiments needs, from the activities' declarations.

Every chaos_ext activity that calls the Kubernetes API declares its rules with
``@needs_k8s`` (:mod:`chaos_ext._core.rbac`). This module imports each Python
activity an experiment uses (hypothesis probes, method, rollbacks), reads its
declaration with :func:`chaos_ext._core.rbac.rbac_of` and merges the rules: one rule
per (API group, resource, scope) with the union of the verbs. Nothing more is
granted than what is declared. Activities of ``chaosk8s`` (chaostoolkit-
kubernetes) declare nothing, so they are reported as *undeclared*: their
permissions cannot be computed.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from chaos_ext._core.rbac import Rule, rbac_of

__all__ = [
    "Permissions",
    "merge_rules",
    "permissions_of",
    "policy_rules",
    "python_activities",
    "python_calls",
]

_K8S_MODULES = ("chaosk8s",)


@dataclass(frozen=True)
class Permissions:
    """Merged rules, and the activities whose needs are unknown."""

    rules: tuple[Rule, ...]
    undeclared: tuple[str, ...]
    activities: tuple[str, ...]

    @property
    def cluster_rules(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.cluster_scoped)

    @property
    def namespaced_rules(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if not r.cluster_scoped)


def python_activities(experiment: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(module, func)`` of every Python-provider activity of an experiment."""
    for module, func, _ in python_calls(experiment):
        yield module, func


def python_calls(experiment: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """``(module, func, arguments)`` of every Python-provider activity of an experiment."""
    hypothesis = experiment.get("steady-state-hypothesis") or {}
    activities = [
        *(hypothesis.get("probes") or []),
        *(experiment.get("method") or []),
        *(experiment.get("rollbacks") or []),
    ]
    for activity in activities:
        provider = activity.get("provider") if isinstance(activity, Mapping) else None
        if isinstance(provider, Mapping) and provider.get("type") == "python":
            arguments = provider.get("arguments")
            yield (
                str(provider.get("module")),
                str(provider.get("func")),
                arguments if isinstance(arguments, Mapping) else {},
            )


def merge_rules(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """One rule per (API group, resource, scope, resource names), verbs united and sorted."""
    verbs: dict[tuple[str, str, bool, tuple[str, ...]], set[str]] = {}
    for rule in rules:
        key = (rule.api_group, rule.resource, rule.cluster_scoped, rule.resource_names)
        verbs.setdefault(key, set()).update(rule.verbs)
    return tuple(
        Rule(group, resource, tuple(sorted(found)), cluster_scoped=cluster, resource_names=names)
        for (group, resource, cluster, names), found in sorted(verbs.items())
    )


def permissions_of(experiments: Iterable[Mapping[str, Any]]) -> Permissions:
    """Import every Python activity and merge what they declare."""
    rules: list[Rule] = []
    undeclared: set[str] = set()
    seen: set[str] = set()
    for experiment in experiments:
        for module_name, func_name, arguments in python_calls(experiment):
            qualified = f"{module_name}.{func_name}"
            func = getattr(importlib.import_module(module_name), func_name)
            declared = rbac_of(func, arguments)  # conditional rules: only the uses that need them
            rules.extend(declared)
            seen.add(qualified)
            if not rbac_of(func) and module_name.split(".")[0] in _K8S_MODULES:
                undeclared.add(qualified)
    return Permissions(merge_rules(rules), tuple(sorted(undeclared)), tuple(sorted(seen)))


def policy_rules(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    """Kubernetes PolicyRule objects."""
    return [
        {
            "apiGroups": [r.api_group],
            "resources": [r.resource],
            **({"resourceNames": list(r.resource_names)} if r.resource_names else {}),
            "verbs": list(r.verbs),
        }
        for r in rules
    ]
